"""Everything a runtime rule may look at: measured once, read by every rule.

Rules are pure functions ``(RunContext) -> list[Finding]``: no I/O, no clock, so they are tested on
contexts built from real and constructed recordings alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuwhy.analysis.alignment import ACTIVE, RUN, GpuWindowStats
from gpuwhy.analysis.framework import Framework
from gpuwhy.analysis.phases import PhaseStats
from gpuwhy.analysis.ranks import RankPhase
from gpuwhy.model import DeviceInfo, Finding

TRAIN = "train"

IDLE_UTIL_PCT = 1.0
"""Below this mean utilization no kernel ran in nearly every sample: NVML reports whole percents
of "time one or more kernels was executing" (references.md#nvml-utilization), so an unused GPU reads
0."""


@dataclass(frozen=True)
class HostStats:
    """The job's process tree on the host during one window."""

    samples: int
    job_cpu_mean_pct: float | None  # 100 = one core busy
    cpu_system_mean_pct: float | None  # all cores, 0..100
    cpu_count: int | None = None


@dataclass(frozen=True)
class PageableCopies:
    """A phase's host-to-device copies from pageable memory (hooks/sync_counting.py)."""

    count: int
    seconds: float  # the host's time blocked in them
    bytes: int


@dataclass(frozen=True)
class RunContext:
    """Measured facts about one run, as the rules see them."""

    duration_s: float
    phases: Mapping[str, PhaseStats]  # named phases, then "data_wait" and "other"
    devices: Sequence[DeviceInfo]
    gpu: Mapping[str, Mapping[int, GpuWindowStats]]  # window (phase, "_run", "_active") -> device
    framework: Framework = Framework.UNKNOWN
    host: Mapping[str, HostStats] = field(default_factory=dict)  # window -> host stats
    environment_facts: Mapping[str, Any] = field(default_factory=dict)
    environment_findings: Sequence[Finding] = ()
    sync_counts: Mapping[str, int] = field(default_factory=dict)  # phase -> hooks' "sync" events
    # phase -> steps with at least one sync; absent where the events do not say (older hooks)
    synced_steps: Mapping[str, int] = field(default_factory=dict)
    # phase -> the host-to-device copies from pageable memory the hooks timed (every process's)
    pageable_copies: Mapping[str, PageableCopies] = field(default_factory=dict)
    # phase -> one row per rank, where two or more processes stepped in it (analysis/ranks.py)
    ranks: Mapping[str, Sequence[RankPhase]] = field(default_factory=dict)
    # phase -> how its input pipeline makes batches (analysis/inputs.py), where the hooks said
    inputs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def named_phases(self) -> list[PhaseStats]:
        return [p for p in self.phases.values() if not p.is_pseudo]

    @property
    def has_gpu_samples(self) -> bool:
        return any(stats.samples or stats.util_samples for stats in self.gpu.get(RUN, {}).values())

    def gpu_during(self, window: str) -> Mapping[int, GpuWindowStats]:
        return self.gpu.get(window, {})

    def active_gpu(self) -> Mapping[int, GpuWindowStats]:
        """GPU readings while any phase ran, or over the whole run if no phase was recorded."""
        return self.gpu.get(ACTIVE) or self.gpu.get(RUN, {})

    def training_phase(self) -> PhaseStats | None:
        """ "train" if recorded, else the named phase with the most steps (a user's own name)."""
        if TRAIN in self.phases:
            return self.phases[TRAIN]
        stepped = [p for p in self.named_phases if p.steps > 0]
        return max(stepped, key=lambda p: (p.steps, p.time_s)) if stepped else None

    def used_devices(self) -> list[int]:
        """GPUs the job's processes showed on; where NVML cannot attribute, GPUs that were busy."""
        used = []
        for device, stats in self.active_gpu().items():
            seen = stats.job_seen
            if seen or (seen is None and (stats.util_mean_pct or 0) >= IDLE_UTIL_PCT):
                used.append(device)
        return used
