"""Small helpers the rule families share: rounding evidence, GPU load of a phase."""

from __future__ import annotations

from collections.abc import Mapping

from gpuwhy.analysis.alignment import GpuWindowStats
from gpuwhy.analysis.context import RunContext
from gpuwhy.analysis.phases import PhaseStats

MIN_PHASE_S = 1.0
"""A phase shorter than this holds too few GPU samples to judge: NVML's utilization period is up
to 1 s (references.md#nvml-utilization), so one sample can stand for the whole phase."""


def r(value: float | None, digits: int = 3) -> float | None:
    """Evidence numbers, rounded so reports stay readable and stable."""
    return None if value is None else round(value, digits)


def used_stats(ctx: RunContext, window: str) -> dict[int, GpuWindowStats]:
    """Readings of the job's GPUs during a window (all GPUs where the job cannot be attributed)."""
    used = set(ctx.used_devices())
    during = ctx.gpu_during(window)
    return {d: s for d, s in during.items() if d in used}


def mean_util(stats: Mapping[int, GpuWindowStats]) -> float | None:
    """Mean utilization over the given devices, or None without utilization readings."""
    values = [s.util_mean_pct for s in stats.values() if s.util_mean_pct is not None]
    return sum(values) / len(values) if values else None


def phase_util(ctx: RunContext, phase: PhaseStats) -> float | None:
    """Mean utilization of the job's GPUs while the phase ran, if it ran long enough to judge."""
    if phase.time_s < MIN_PHASE_S:
        return None
    return mean_util(used_stats(ctx, phase.name))
