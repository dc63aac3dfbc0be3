"""Pure NVML conversions: error classes, clock-event reasons, timestamps, GPM values, job share.

Everything here works on plain numbers, so it is tested without a GPU; `nvml.py` only makes
the driver calls and hands their results to these functions. NVML's behaviour is cited as
references.md#NAME (docs/references.md, from nvml.h and the nvidia-ml-py source).
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpuwhy.nvml_codes import (
    ARGUMENT_VERSION_MISMATCH,
    DRIVER_NOT_LOADED,
    FUNCTION_NOT_FOUND,
    GPU_NOT_FOUND,
    INVALID_ARGUMENT,
    LIB_RM_VERSION_MISMATCH,
    LIBRARY_NOT_FOUND,
    NO_DATA,
    NO_PERMISSION,
    NOT_FOUND,
    NOT_READY,
    NOT_SUPPORTED,
)

VALUE_MISSING_CODES = frozenset(
    {
        INVALID_ARGUMENT,
        NOT_SUPPORTED,
        NO_PERMISSION,
        NOT_FOUND,
        FUNCTION_NOT_FOUND,
        NO_DATA,
        ARGUMENT_VERSION_MISMATCH,
        NOT_READY,
    }
)
"""Codes that mean "this value is not available here", not "the GPU failed": the field is None."""

PERMANENTLY_MISSING_CODES = frozenset(
    {
        INVALID_ARGUMENT,
        NOT_SUPPORTED,
        NO_PERMISSION,
        FUNCTION_NOT_FOUND,
        ARGUMENT_VERSION_MISMATCH,
    }
)
"""Of those, the ones that will not change while running: the call is not tried again."""


class NvmlProblem(enum.Enum):
    """Why NVML cannot be used on this machine (references.md#nvml-init)."""

    NO_LIBRARY = "no_library"
    DRIVER_NOT_LOADED = "driver_not_loaded"
    NO_GPU = "no_gpu"
    VERSION_MISMATCH = "version_mismatch"
    NO_PERMISSION = "no_permission"
    OTHER = "other"


@dataclass(frozen=True)
class NvmlUnavailable:
    """A classified NVML start-up failure: what is wrong, and what to do."""

    problem: NvmlProblem
    message: str
    fix: str

    def one_line(self) -> str:
        return f"{self.message} — {self.fix}"


_PROBLEMS: dict[int, tuple[NvmlProblem, str, str]] = {
    LIBRARY_NOT_FOUND: (
        NvmlProblem.NO_LIBRARY,
        "no NVIDIA driver: the NVML library cannot be loaded",
        "install the NVIDIA driver; in a container, start it with the NVIDIA runtime "
        "(docker run --gpus all)",
    ),
    DRIVER_NOT_LOADED: (
        NvmlProblem.DRIVER_NOT_LOADED,
        "the NVIDIA kernel driver is not loaded",
        "load or reinstall the driver (nvidia-smi must work), then try again",
    ),
    GPU_NOT_FOUND: (
        NvmlProblem.NO_GPU,
        "the NVIDIA driver is running but finds no GPU",
        "check that the GPU is seated and powered (nvidia-smi -L); in a VM or container, "
        "pass the GPU through",
    ),
    LIB_RM_VERSION_MISMATCH: (
        NvmlProblem.VERSION_MISMATCH,
        "the NVIDIA driver library and kernel module have different versions",
        "reboot after the driver update (or reload the nvidia kernel module)",
    ),
    FUNCTION_NOT_FOUND: (
        NvmlProblem.VERSION_MISMATCH,
        "the NVIDIA driver is too old for nvidia-ml-py",
        "update the NVIDIA driver",
    ),
    NO_PERMISSION: (
        NvmlProblem.NO_PERMISSION,
        "not allowed to talk to the NVIDIA driver",
        "check the permissions of /dev/nvidia* (e.g. membership of the video group)",
    ),
}


def classify_nvml_error(error: BaseException) -> NvmlUnavailable:
    """Classify an exception from importing pynvml, nvmlInit() or nvmlDeviceGetCount()."""
    if isinstance(error, ImportError):
        return NvmlUnavailable(
            NvmlProblem.NO_LIBRARY, "nvidia-ml-py is not installed", "pip install nvidia-ml-py"
        )
    code = getattr(error, "value", None)
    if isinstance(code, int) and code in _PROBLEMS:
        return NvmlUnavailable(*_PROBLEMS[code])
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return NvmlUnavailable(
        NvmlProblem.OTHER,
        f"NVML failed to start ({text})",
        "run nvidia-smi to see what the driver reports",
    )


def no_gpu() -> NvmlUnavailable:
    """NVML started, but the driver lists zero devices."""
    return NvmlUnavailable(*_PROBLEMS[GPU_NOT_FOUND])


# ---- clock-event (throttle) reasons: references.md#nvml-clock-events
# -------------------------------------------
CLOCK_EVENT_REASONS: Mapping[int, str] = {
    0x1: "idle",
    0x2: "application clocks",
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal",
    0x40: "hardware thermal",
    0x80: "power brake",
    0x100: "display clocks",
}
"""NVML clock-event reason bits (nvmlClocksEventReason*) and their short names."""

THROTTLING_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
"""Bits that mean clocks are held down by power or heat (not idle, sync boost or a setting)."""


def decode_clock_event_reasons(mask: int | None) -> list[str]:
    """Names of the set bits, lowest first; unknown bits as hex. [] for 0, None or unknown."""
    if not mask:
        return []
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    if unknown:
        names.append(hex(unknown))
    return names


# ---- timestamps of nvmlDeviceGetSamples / GetProcessUtilization: references.md#nvml-samples
# ---------------
class TimeDomain(enum.Enum):
    """Which clock NVML's "CPU timestamp in microseconds" turns out to follow."""

    WALL = "wall"  # Unix epoch µs (what samples in the wild look like)
    BOOT = "boot"  # µs since boot (one third-party report)
    MONOTONIC = "monotonic"


MAX_SAMPLE_AGE_NS = 3600 * 10**9  # driver buffers hold seconds to minutes, never hours
_FUTURE_TOLERANCE_NS = 2 * 10**9  # clocks read at slightly different instants


def detect_time_domain(stamp_us: int, now_ns: Mapping[TimeDomain, int]) -> TimeDomain | None:
    """The clock under which `stamp_us` is a recent past instant, or None if none fits.

    The candidates are decades apart (epoch vs. boot), so the choice is unambiguous; the clock
    whose "now" is nearest above the stamp wins.
    """
    best: tuple[int, TimeDomain] | None = None
    for domain, now in now_ns.items():
        age = now - stamp_us * 1000
        if -_FUTURE_TOLERANCE_NS <= age <= MAX_SAMPLE_AGE_NS and (
            best is None or abs(age) < best[0]
        ):
            best = (abs(age), domain)
    return None if best is None else best[1]


def to_monotonic_ns(stamp_us: int, domain: TimeDomain, now_ns: Mapping[TimeDomain, int]) -> int:
    """An NVML µs timestamp of `domain` on gpuwhy's monotonic clock (never after now)."""
    age = max(now_ns[domain] - stamp_us * 1000, 0)
    return now_ns[TimeDomain.MONOTONIC] - age


def new_samples(
    samples: Iterable[tuple[int, int]], last_seen_us: int
) -> tuple[int, list[tuple[int, int]]]:
    """(timestamp_us, value) samples newer than `last_seen_us`, in time order, and the newest
    timestamp to pass back next time (only ever one NVML returned: references.md#nvml-samples)."""
    fresh = sorted((stamp, value) for stamp, value in samples if stamp > last_seen_us)
    return (fresh[-1][0] if fresh else last_seen_us), fresh


SAMPLES_INTERVAL_NS = 2 * 10**9
"""How often the driver's buffered utilization samples are fetched (references.md#nvml-samples).

A fetch costs milliseconds (2.7 ms a call, two calls for the two kinds, on an H200:
docs/performance.md), so fetching on every 10 Hz tick cost about 5 % of a core. The samples carry
their own timestamps, so fetching them late loses nothing while the driver's buffer holds more than
the interval: it held 200 ms samples on the H200, and the buffer's size is undocumented, so
`SampleCadence` watches for a gap that says samples were dropped and fetches more often then."""

_DROPPED_GAP = 1.5  # a first new sample this many spacings after the last seen one: a gap
_MIN_SAMPLES_INTERVAL_NS = 100_000_000  # samples come ≥ 1/6 s apart: more often finds nothing new


@dataclass
class SampleCadence:
    """When to fetch one GPU's buffered samples next (see SAMPLES_INTERVAL_NS)."""

    interval_ns: int = SAMPLES_INTERVAL_NS
    next_ns: int = 0
    spacing_us: int | None = None  # the driver's sample spacing: the median gap of one fetch
    most: int = 0  # the most samples one fetch returned: the buffer holds at least that many

    def due(self, now_ns: int) -> bool:
        return now_ns >= self.next_ns

    def fetched(self, now_ns: int, last_seen_us: int, stamps_us: list[int]) -> None:
        """Note one fetch: `stamps_us` are the new samples' timestamps in time order, newer than
        `last_seen_us` (0 when none was seen before).

        A full buffer (as many samples as any fetch returned) that begins with a gap after the last
        seen sample (more than 1.5 spacings: one missing) overflowed since the last fetch: the
        interval halves (down to 100 ms). A gap alone is not enough: an idle GPU's buffer can run
        dry, and then fill again."""
        gaps = sorted(b - a for a, b in itertools.pairwise(stamps_us))
        if gaps:
            self.spacing_us = max(gaps[len(gaps) // 2], 1)
        spacing = self.spacing_us
        if (
            spacing is not None
            and last_seen_us > 0
            and len(stamps_us) >= max(self.most, 2)
            and stamps_us[0] - last_seen_us > _DROPPED_GAP * spacing
        ):
            self.interval_ns = max(self.interval_ns // 2, _MIN_SAMPLES_INTERVAL_NS)
        self.most = max(self.most, len(stamps_us))
        self.next_ns = now_ns + self.interval_ns


def latest_process_shares(
    samples: Iterable[tuple[int, int, int]], last_seen_us: int
) -> tuple[dict[int, int], int]:
    """pid -> SM % from (pid, timestamp_us, sm %) process samples (the newest per pid, of those
    newer than `last_seen_us`), and the timestamp to pass back next time
    (references.md#nvml-processes)."""
    newest: dict[int, tuple[int, int]] = {}
    for pid, stamp, sm in samples:
        if stamp > last_seen_us and stamp >= newest.get(pid, (-1, 0))[0]:
            newest[pid] = (stamp, min(max(sm, 0), 100))
    last = max((stamp for stamp, _ in newest.values()), default=last_seen_us)
    return {pid: sm for pid, (_, sm) in newest.items()}, last


# ---- GPM (Hopper and newer): references.md#nvml-gpm
# ---------------------------------------------------
GPM_MIN_INTERVAL_NS = 100_000_000
"""Two GPM samples must be at least 100 ms apart ("due to the internal sample refresh rate")."""


def gpm_permille(percent: float | None) -> int | None:
    """A GPM metric (0.0–100.0 %) as an integer permille, clamped; None if not a number."""
    if percent is None or math.isnan(percent) or math.isinf(percent):
        return None
    return round(min(max(percent, 0.0), 100.0) * 10)


# ---- the job's share of a GPU ---------------------------------------------------------------
@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a GPU, as NVML lists it (host pids: references.md#nvml-processes)."""

    pid: int
    memory_bytes: int | None  # None on Windows WDDM
    sm_pct: int | None = None  # share of the SMs over the last sample period, if reported
    in_job: bool = False


def job_usage(
    processes: list[GpuProcess] | None, job_pids: frozenset[int], pid_visible: Mapping[int, bool]
) -> tuple[int | None, int | None]:
    """(memory bytes, SM %) the job's processes use on one GPU; None where it cannot be told.

    NVML reports host pids; inside a container without the host pid namespace they match none
    of ours. When no job pid is on the GPU but some listed pid does not exist here, a 0 would be
    a guess, so the share is unknown (None) instead.
    """
    if processes is None or not job_pids:
        return None, None
    mine = [p for p in processes if p.pid in job_pids]
    if not mine and any(not pid_visible.get(p.pid, True) for p in processes):
        return None, None
    memory = [p.memory_bytes for p in mine if p.memory_bytes is not None]
    sm = [p.sm_pct for p in mine if p.sm_pct is not None]
    memory_total = sum(memory) if memory or not mine else None
    sm_total = min(sum(sm), 100) if sm or not mine else None
    return memory_total, sm_total
