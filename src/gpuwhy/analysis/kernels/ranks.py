"""Findings across the ranks of one job: one rank computing longer than the others.

In data-parallel training every rank meets the others at each collective, so the rank with the
most compute per step sets the pace and the others wait inside their collectives. The threshold
is GPU_IMBALANCE's for a recording (SageMaker Debugger's LoadBalancing rule, 0.2).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from gpuwhy.analysis.kernels.steps import RankFacts
from gpuwhy.analysis.rules.multi_gpu import IMBALANCE_FRACTION, IMBALANCE_REFERENCE
from gpuwhy.model import Finding, Severity

IMBALANCE_FIX = (
    "Give every rank the same work per step: even per-rank batches (`DistributedSampler` with "
    "`drop_last=True`; bucket variable-length samples by length), no extra work on one rank "
    "(logging, evaluation, checkpointing on rank 0 in the step); check that the slow rank's GPU "
    "is not throttled or shared (`gpuwhy doctor`, `nvidia-smi -q -d PERFORMANCE`)."
)


def _compute_ms(rank: RankFacts) -> float:
    steps = rank.steps
    return sum(s.compute_ns for s in steps) / len(steps) / 1e6


def rank_imbalance(ranks: Sequence[RankFacts], phase: str) -> Finding | None:
    """GPU_IMBALANCE when the ranks' compute per step differs by more than 20 % of the largest."""
    measured = [r for r in ranks if r.steps and r.has_device_work]
    if len(measured) < 2:
        return None
    compute = {r.trace.rank: _compute_ms(r) for r in measured}
    slowest = max(compute, key=lambda rank: compute[rank])
    top, low = compute[slowest], min(compute.values())
    if top <= 0 or (top - low) / top <= IMBALANCE_FRACTION:
        return None
    median = statistics.median(compute.values())
    step_ms = statistics.median(
        [s.time_ns / 1e6 for r in measured for s in r.steps if r.trace.rank == slowest]
    )
    saved = min(top - median, step_ms)
    return Finding(
        code="GPU_IMBALANCE",
        severity=Severity.WARNING,
        title=(
            f"rank {slowest} computes {top:.0f} ms a step, the others as little as {low:.0f} ms: "
            "they wait for it at every collective"
        ),
        evidence={
            "phase": phase,
            "slowest_rank": slowest,
            "compute_ms_per_step": {str(rank): round(ms, 2) for rank, ms in compute.items()},
            "imbalance": round((top - low) / top, 3),
            "ranks": len(measured),
            "threshold": IMBALANCE_FRACTION,
            "reference": IMBALANCE_REFERENCE,
        },
        fix=IMBALANCE_FIX,
        speedup=round(step_ms / (step_ms - saved), 3) if step_ms > saved else None,
        speedup_method=(
            "at most: the slowest rank's compute per step brought down to the median rank's, "
            "over its median step time (the others wait for it at the collectives)"
        ),
    )
