"""GPU samples lined up against the phases: what each GPU did while each phase ran.

One streaming pass over the recording's GPU samples (memory stays flat however long the run):
each sample is credited to every window that contains its timestamp — every named phase, "other",
the whole run, and "active" (any phase). Utilization comes from the driver's buffered samples
(`nvmlDeviceGetSamples`, ~1/6 s each) where the recording has them, because the polled counter
averages over up to a second and smooths sub-second input stalls away
(references.md#nvml-utilization).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpuwhy.analysis.intervals import Interval, IntervalSet

RUN = "_run"  # the whole run
ACTIVE = "_active"  # any named phase: the job's training/evaluation proper

# NVML clock-event reason bits (references.md#nvml-clock-events; pynvml nvmlClocksEventReason*).
GPU_IDLE = 0x1


@dataclass(frozen=True)
class GpuWindowStats:
    """One device's readings during one window; means over the samples inside it."""

    device: int
    samples: int
    util_mean_pct: float | None
    util_source: str  # "driver buffer" or "polled"
    util_samples: int
    sm_active_mean: float | None  # 0..1 (GPM SM_UTIL / DCGM SM_ACTIVE)
    sm_occupancy_mean: float | None  # 0..1
    tensor_active_mean: float | None  # 0..1
    memory_used_max_bytes: int | None
    job_memory_max_bytes: int | None
    job_sm_mean_pct: float | None
    pcie_rx_mean_kbps: float | None
    pcie_tx_mean_kbps: float | None
    sm_clock_mean_mhz: float | None
    reason_counts: Mapping[int, int] = field(default_factory=dict)  # bit -> samples with it set
    reason_samples: int = 0  # samples that carried a reasons bitmask

    @property
    def job_seen(self) -> bool | None:
        """Whether the job's processes ever showed on this GPU; None where NVML could not say."""
        if self.job_memory_max_bytes is None and self.job_sm_mean_pct is None:
            return None
        return bool(self.job_memory_max_bytes) or bool(self.job_sm_mean_pct)

    @property
    def job_share(self) -> float | None:
        """The job's part of this GPU's busy time (its SM % over the device's utilization)."""
        if self.job_sm_mean_pct is None or not self.util_mean_pct:
            return None
        return min(self.job_sm_mean_pct / self.util_mean_pct, 1.0)


# Fields averaged (GPM counters in permille, scaled to 0..1 when read out) and maximised.
_MEAN_FIELDS = (
    "util_gpu_pct",
    "sm_active_permille",
    "sm_occupancy_permille",
    "tensor_active_permille",
    "job_sm_pct",
    "pcie_rx_kbps",
    "pcie_tx_kbps",
    "sm_clock_mhz",
)
_UTIL, _SM, _OCC, _TENSOR, _JOB_SM, _RX, _TX, _CLOCK = range(len(_MEAN_FIELDS))
_N_MEANS = len(_MEAN_FIELDS)
_READ_FIELDS = (*_MEAN_FIELDS, "memory_used_bytes", "job_memory_bytes", "clock_event_reasons")


class _Acc:
    """Running sums for one (time segment, device); merged into windows at the end.

    Plain lists and one attrgetter per sample: this loop runs once per GPU sample of the run
    (hours at 10 Hz on 8 GPUs are millions), so it avoids an object or a call per field.
    """

    __slots__ = (
        "buffered_n",
        "buffered_total",
        "counts",
        "job_memory_max",
        "memory_max",
        "reason_samples",
        "reasons",
        "samples",
        "totals",
    )

    def __init__(self) -> None:
        self.samples = 0
        self.counts = [0] * _N_MEANS
        self.totals = [0.0] * _N_MEANS
        self.buffered_n = 0
        self.buffered_total = 0.0
        self.memory_max: int | None = None
        self.job_memory_max: int | None = None
        self.reasons: Counter[int] = Counter()
        self.reason_samples = 0

    def merge(self, other: _Acc) -> None:
        self.samples += other.samples
        for i in range(_N_MEANS):
            self.counts[i] += other.counts[i]
            self.totals[i] += other.totals[i]
        self.buffered_n += other.buffered_n
        self.buffered_total += other.buffered_total
        self.memory_max = _max(self.memory_max, other.memory_max)
        self.job_memory_max = _max(self.job_memory_max, other.job_memory_max)
        self.reasons.update(other.reasons)
        self.reason_samples += other.reason_samples

    def _mean(self, i: int, scale: float = 1.0) -> float | None:
        return self.totals[i] / self.counts[i] * scale if self.counts[i] else None

    def stats(self, device: int) -> GpuWindowStats:
        buffered = self.buffered_n > 0
        return GpuWindowStats(
            device=device,
            samples=self.samples,
            util_mean_pct=self.buffered_total / self.buffered_n if buffered else self._mean(_UTIL),
            util_source="driver buffer" if buffered else "polled",
            util_samples=self.buffered_n if buffered else self.counts[_UTIL],
            sm_active_mean=self._mean(_SM, 1e-3),
            sm_occupancy_mean=self._mean(_OCC, 1e-3),
            tensor_active_mean=self._mean(_TENSOR, 1e-3),
            memory_used_max_bytes=self.memory_max,
            job_memory_max_bytes=self.job_memory_max,
            job_sm_mean_pct=self._mean(_JOB_SM),
            pcie_rx_mean_kbps=self._mean(_RX),
            pcie_tx_mean_kbps=self._mean(_TX),
            sm_clock_mean_mhz=self._mean(_CLOCK),
            reason_counts=dict(self.reasons),
            reason_samples=self.reason_samples,
        )


def _max(current: int | None, value: int | None) -> int | None:
    if value is None:
        return current
    return value if current is None else max(current, value)


class _Segments:
    """The run cut at every window boundary: each piece lies inside a fixed set of windows.

    Samples arrive in time order, so finding a sample's piece is a forward walk, and each sample
    is accumulated once (not once per window it falls in).
    """

    def __init__(self, sets: Mapping[str, IntervalSet]) -> None:
        points = sorted({p for window in sets.values() for i in window.intervals for p in i})
        self.points = points
        self.keys: list[tuple[str, ...]] = [
            tuple(name for name, window in sets.items() if start in window) for start in points[:-1]
        ]
        self._index = 0


def segment_windows(
    windows: Mapping[str, Iterable[Interval]],
) -> tuple[list[int], list[tuple[str, ...]]]:
    """The run cut at every window boundary: the sorted cut points, and for each segment
    between consecutive points the names of the windows it lies in."""
    segments = _Segments({name: IntervalSet(intervals) for name, intervals in windows.items()})
    return segments.points, segments.keys


class _Summaries(Protocol):
    """The part of `Recording` the summary path reads: exact per-GPU summaries of time segments."""

    def gpu_segments(
        self,
        bounds_ns: Sequence[int],
        device: int | None = None,
        metrics: Collection[str] | None = None,
    ) -> Sequence[Mapping[int, Any]]: ...

    def util_segments(
        self,
        bounds_ns: Sequence[int],
        device: int | None = None,
        metrics: Collection[str] | None = None,
    ) -> Sequence[Mapping[int, Any]]: ...


def _from_bucket(bucket: Any) -> _Acc:
    """An accumulator holding a recording tier bucket's exact sums (TierBucket, recording.tiers)."""
    acc = _Acc()
    acc.samples = bucket.samples
    for i, name in enumerate(_MEAN_FIELDS):
        summary = bucket.summary(name)
        if summary is not None:
            acc.counts[i], acc.totals[i] = summary.n, summary.total
    memory, job_memory = bucket.summary("memory_used_bytes"), bucket.summary("job_memory_bytes")
    acc.memory_max = None if memory is None else int(memory.maximum)
    acc.job_memory_max = None if job_memory is None else int(job_memory.maximum)
    reasons = bucket.summary("clock_event_reasons")
    acc.reason_samples = 0 if reasons is None else reasons.n
    acc.reasons = Counter(bucket.reason_counts)
    return acc


def align_summaries(
    windows: Mapping[str, Iterable[Interval]],
    recording: _Summaries,
    device: int | None = None,
) -> dict[str, dict[int, GpuWindowStats]]:
    """What `align` computes, from the recording's stored tiers instead of every sample.

    The run is cut at every window boundary into segments that each lie in a fixed set of
    windows; the recording summarises every segment exactly in one pass (`gpu_segments`: the
    1-min tier where no boundary falls, raw samples only in the minutes one cuts), and each
    segment is credited to its windows. Same numbers as streaming every sample: counts, sums,
    minima, maxima and reason bits are exact integers in the tiers. A day of 8 GPUs with a
    thousand phase intervals takes seconds instead of minutes. With `device`, that GPU alone.
    """
    points, keys = segment_windows(windows)
    merged: dict[tuple[str, int], _Acc] = {}
    if len(points) >= 2:
        one = {} if device is None else {"device": device}  # a job's merged nodes: all GPUs
        gpu = recording.gpu_segments(points, metrics=_READ_FIELDS, **one)
        util = recording.util_segments(points, metrics=("gpu_pct",), **one)
        for names, gpu_buckets, util_buckets in zip(keys, gpu, util, strict=True):
            if not names:
                continue
            accs = {device: _from_bucket(bucket) for device, bucket in gpu_buckets.items()}
            for device, bucket in util_buckets.items():
                summary = bucket.summary("gpu_pct")
                if summary is not None:
                    acc = accs.setdefault(device, _Acc())
                    acc.buffered_n += summary.n
                    acc.buffered_total += summary.total
            for device, acc in accs.items():
                for name in names:
                    merged.setdefault((name, device), _Acc()).merge(acc)
    result: dict[str, dict[int, GpuWindowStats]] = {name: {} for name in windows}
    for (name, device), acc in sorted(merged.items()):
        result[name][device] = acc.stats(device)
    return result
