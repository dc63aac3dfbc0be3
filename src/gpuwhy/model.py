"""The shared vocabulary: findings and the records that flow from sources and hooks to analysis.

This module is the bottom layer: it imports nothing of gpuwhy and no third-party package.
Units live in the field names; a value a source cannot give is ``None``, never an exception.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

JSON_SCHEMA_VERSION = 1  # "schema_version" of the JSON documents: report (schemas/), doctor --json
NS_PER_S = 1_000_000_000  # every timestamp in gpuwhy is an integer count of nanoseconds
"""Version of the JSON documents gpuwhy writes (doctor --json, run/report --json)."""


class Severity(str, enum.Enum):
    """How bad a finding is (docs/architecture.md, Findings)."""

    ERROR = "error"  # the GPU cannot be used
    WARNING = "warning"  # the GPU is used poorly
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 for the worst: sorts errors before warnings before infos."""
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass(frozen=True)
class Finding:
    """One diagnosis: the public contract of every report (docs/architecture.md)."""

    code: str  # stable UPPER_SNAKE identifier, never renamed
    severity: Severity
    title: str  # one line a person understands without the docs
    evidence: Mapping[str, Any]  # measured numbers and facts, units in key names
    fix: str  # what to change, for this machine or framework
    speedup: float | None = None  # estimated whole-run speed-up if fixed (2.4 = 2.4x faster)
    speedup_method: str | None = None  # how `speedup` was estimated

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "title": self.title,
            "evidence": dict(self.evidence),
            "fix": self.fix,
            "speedup": self.speedup,
            "speedup_method": self.speedup_method,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            code=str(data["code"]),
            severity=Severity(data["severity"]),
            title=str(data["title"]),
            evidence=dict(data.get("evidence") or {}),
            fix=str(data.get("fix") or ""),
            speedup=data.get("speedup"),
            speedup_method=data.get("speedup_method"),
        )


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Most valuable first: severity, then estimated speed-up (largest first), then code."""
    return sorted(findings, key=lambda f: (f.severity.rank, -(f.speedup or 1.0), f.code))


# --------------------------------------------------------------------------------------------
# Devices and telemetry records. Times are CLOCK_MONOTONIC nanoseconds (time.monotonic_ns()),
# which on Linux is one clock for every process of the machine: spans from the job's processes
# and samples from gpuwhy's sampler line up without translation.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceInfo:
    """A GPU as NVML enumerates it (NVML index, not the framework's: map by UUID/PCI bus id)."""

    index: int
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total_bytes: int | None = None
    compute_capability: tuple[int, int] | None = None
    sm_clock_max_mhz: int | None = None
    power_limit_mw: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    mig_mode: bool | None = None
    gpm_supported: bool | None = None


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One reading of one GPU at `t_ns` (integers: compact storage, exact replays)."""

    t_ns: int
    device: int
    util_gpu_pct: int | None = None  # NVML: % of the period in which any kernel ran
    util_mem_pct: int | None = None  # NVML: % of the period memory was read/written (not capacity)
    memory_used_bytes: int | None = None
    sm_clock_mhz: int | None = None
    power_mw: int | None = None
    temperature_c: int | None = None
    pcie_tx_kbps: int | None = None  # NVML KB/s over a 20 ms window
    pcie_rx_kbps: int | None = None
    pcie_gen: int | None = None  # current link generation/width (drops when idle)
    pcie_width: int | None = None
    clock_event_reasons: int | None = None  # NVML bitmask (references.md#nvml-clock-events)
    # GPM (Hopper and newer), in permille (0..1000) of the metric's 0..100 % range.
    sm_active_permille: int | None = None
    sm_occupancy_permille: int | None = None
    tensor_active_permille: int | None = None
    dram_active_permille: int | None = None
    # The job's own processes on this GPU (process tree of the command).
    job_memory_bytes: int | None = None
    job_sm_pct: int | None = None


class UtilKind(enum.IntEnum):
    """Which buffered driver sample (`nvmlDeviceGetSamples`) a `UtilSample` carries."""

    GPU = 1  # NVML_GPU_UTILIZATION_SAMPLES
    MEMORY = 2  # NVML_MEMORY_UTILIZATION_SAMPLES


@dataclass(frozen=True, slots=True)
class UtilSample:
    """A driver-buffered utilization sample: finer than the polled counter."""

    t_ns: int  # converted to gpuwhy's monotonic clock
    device: int
    kind: UtilKind
    value_pct: int


@dataclass(frozen=True, slots=True)
class HostSample:
    """The host and the job's process tree at `t_ns`."""

    t_ns: int
    cpu_system_pct: float | None = None  # all cores, 0..100
    job_cpu_pct: float | None = None  # process tree, 100 = one core fully busy
    job_rss_bytes: int | None = None
    job_processes: int | None = None
    memory_available_bytes: int | None = None


class SpanKind(enum.IntEnum):
    """What a span covers."""

    PHASE = 1  # a region: fit's training, evaluate, predict, a user's `gpuwhy.phase("x")`
    STEP = 2  # one step (or one compiled execution of several steps) inside a phase
    WAIT = 3  # time a step spent waiting for its input


@dataclass(frozen=True, slots=True)
class Span:
    """A timed region emitted by a hook. O(1) to create on the training thread."""

    phase: str  # "train", "validation", "predict", or a user's name
    kind: SpanKind
    start_ns: int
    end_ns: int
    step: int | None = None  # first step index covered (STEP/WAIT)
    steps: int = 1  # how many steps the span covers (Keras steps_per_execution)
    pid: int | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened once: a source degraded, the child exited, a signal arrived."""

    t_ns: int
    kind: str  # e.g. "source_degraded", "child_started", "child_exited", "signal", "hook"
    message: str
    data: Mapping[str, Any] = field(default_factory=dict)


Record = GpuSample | UtilSample | HostSample | Span | Event
"""Anything a source or hook hands to a recording."""
