"""Kernel-aware findings from a rank's steps: INPUT_BOUND (exposed wait only) and LAUNCH_BOUND.

Shares are of the profiled steps' summed time, as the phase table's; speed-ups are Amdahl's over
those steps: their time over their time less the idle the fix removes. Kernel sizes are medians.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from gpuwhy.analysis.kernels.steps import RankFacts, StepFacts
from gpuwhy.analysis.rules.input_bound import FIXES as INPUT_FIXES
from gpuwhy.analysis.rules.input_bound import HIGH_FRACTION, MODERATE_FRACTION
from gpuwhy.analysis.rules.input_bound import REFERENCE as INPUT_REFERENCE
from gpuwhy.model import Finding, Severity

LAUNCH_HIGH_FRACTION = 0.15
"""The device idles, waiting for the host to launch work, >= 15 % of the step: XProf's "high"
band for kernel-launch time (references.md#xprof-input-pipeline)."""

LAUNCH_FIX = (
    "Launch a step's kernels at once instead of one by one: "
    '`model = torch.compile(model, mode="reduce-overhead")` (CUDA graphs), or capture the step '
    "with `torch.cuda.graphs`; fewer, larger kernels also help: a larger batch "
    "(changes the optimisation: scale the learning rate), fused optimizers "
    "(`torch.optim.AdamW(..., fused=True)`), mixed precision. Keep Python work (logging, "
    "`.item()`, metrics) out of the step."
)
LAUNCH_REFERENCE = (
    "XProf kernel-launch band (>= 15 % high); HTA short kernels: device time < launch call time"
)


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def _speedup(steps: Sequence[StepFacts], saved: Callable[[StepFacts], int]) -> float:
    """The steps' time over their time with ``saved`` removed from each (Amdahl)."""
    before = sum(s.time_ns for s in steps)
    after = before - sum(min(saved(s), s.time_ns) for s in steps)
    return round(before / after, 3) if after > 0 else 1.0


def _fraction(steps: Sequence[StepFacts], part: Callable[[StepFacts], int]) -> float:
    total = sum(s.time_ns for s in steps)
    return sum(part(s) for s in steps) / total if total > 0 else 0.0


def _who(facts: RankFacts) -> str:
    """ "rank 3: " in a multi-rank trace; nothing for a single trace without rank."""
    return f"rank {facts.trace.rank}: " if facts.trace.rank is not None else ""


def _mean_ms(steps: Sequence[StepFacts], part: Callable[[StepFacts], int]) -> float:
    return sum(part(s) for s in steps) / len(steps) / 1e6 if steps else 0.0


def _r(value: float, digits: int = 3) -> float:
    return round(value, digits)


def input_bound(facts: RankFacts, phase: str) -> Finding | None:
    """The device idles while the host waits in the data loader."""
    steps = facts.steps
    if not steps or not facts.has_device_work:
        return None
    fraction = _fraction(steps, lambda s: s.loader_exposed_ns)
    if fraction < MODERATE_FRACTION:
        return None
    high = fraction >= HIGH_FRACTION
    speedup = _speedup(steps, lambda s: s.loader_exposed_ns)
    return Finding(
        code="INPUT_BOUND",
        severity=Severity.WARNING if high else Severity.INFO,
        title=(
            f"{_who(facts)}the GPU idles {fraction:.0%} of the steps' time while the host "
            f"loads data ({'highly' if high else 'moderately'} input-bound)"
        ),
        evidence={
            "phase": phase,
            "rank": facts.trace.rank,
            "data_wait_fraction": _r(fraction),
            "loader_fraction": _r(_fraction(steps, lambda s: s.loader_ns)),
            "exposed_wait_ms_per_step": _r(_mean_ms(steps, lambda s: s.loader_exposed_ns), 2),
            "loader_ms_per_step": _r(_mean_ms(steps, lambda s: s.loader_ns), 2),
            "step_time_ms": _r(_median([s.time_ns / 1e6 for s in steps]), 2),
            "gpu_busy": _r(_fraction(steps, lambda s: s.time_ns - s.idle_ns)),
            "steps": len(steps),
            "band": "high" if high else "moderate",
            "threshold_fraction": HIGH_FRACTION if high else MODERATE_FRACTION,
            "reference": INPUT_REFERENCE,
        },
        fix=INPUT_FIXES["torch"],
        speedup=speedup,
        speedup_method=(
            "the device's idle time inside the data loader's calls removed from each step "
            "(the loading the device overlapped with queued kernels costs nothing); "
            "median step before over median step after"
        ),
    )


def _launch_gap_ns(step: StepFacts) -> int:
    """Host-wait idle not explained by data loading or blocking syncs: launch overhead."""
    return max(step.host_wait_ns - step.loader_exposed_ns - step.sync_exposed_ns, 0)


def launch_bound(facts: RankFacts, phase: str) -> Finding | None:
    """The device runs short kernels and idles between them, waiting for the host to launch."""
    steps = facts.steps
    trace = facts.trace
    if not steps or not facts.has_device_work or not trace.launch_calls:
        return None
    fraction = _fraction(steps, _launch_gap_ns)
    launch_call_us = trace.launch_call_ns / trace.launch_calls / 1000
    medians = [s.kernel_median_ns for s in steps if s.kernel_median_ns is not None]
    kernel_us = _median(medians) / 1000
    if fraction < LAUNCH_HIGH_FRACTION or kernel_us >= launch_call_us:
        return None
    return Finding(
        code="LAUNCH_BOUND",
        severity=Severity.WARNING,
        title=(
            f"{_who(facts)}the GPU waits for the host to launch kernels "
            f"{fraction:.0%} of the steps' time ({_median([s.kernels for s in steps]):.0f} short "
            "kernels a step)"
        ),
        evidence={
            "phase": phase,
            "rank": trace.rank,
            "launch_wait_fraction": _r(fraction),
            "kernels_per_step": _median([s.kernels for s in steps]),
            "kernel_median_us": _r(kernel_us, 2),
            "launch_call_mean_us": _r(launch_call_us, 2),
            "step_time_ms": _r(_median([s.time_ns / 1e6 for s in steps]), 2),
            "gpu_busy": _r(_fraction(steps, lambda s: s.time_ns - s.idle_ns)),
            "threshold_fraction": LAUNCH_HIGH_FRACTION,
            "reference": LAUNCH_REFERENCE,
        },
        fix=LAUNCH_FIX,
        speedup=_speedup(steps, _launch_gap_ns),
        speedup_method=(
            "at most: the device's waits for launches (host-wait idle outside data loading and "
            "syncs) removed from each step, as if the step's kernels were queued at once"
        ),
    )


CHECKS = (input_bound, launch_bound)
CODES = ("INPUT_BOUND", "LAUNCH_BOUND")
