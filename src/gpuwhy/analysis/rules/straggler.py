"""STRAGGLER: one rank's input is slower than the others', and every rank waits for it.

In synchronous data parallelism (DDP, MirroredStrategy, Horovod) every step ends in a collective
(the gradient all-reduce) that no rank leaves before the last one arrives, so all ranks step at
the pace of the slowest. A rank whose own work before the collective takes longer is the
straggler; what the hooks see of that work is the input wait each rank measured for itself.
The lag is the straggler's wait per steady step minus the median of the other ranks': that is
how long each of the others waits for it at the collective, every step. It is flagged when it
is at least 10 % of the step (TraceML's post-run straggler threshold, skew 0.10 of the median
rank, and its floor of 20 analysed steps: references.md#traceml-straggler); the speed-up is
the steady steps without the lag (whatif.match_median_rank), checked against the same job with
the rank's input as quick as the others' (tests/distributed).

A rank slower in its compute (a throttled or slower GPU, another process on its GPU) shows no
input lag; its cause is read from a profiler trace (`gpuwhy run --profile`, EXPOSED_COMMS).
"""

from __future__ import annotations

import statistics

from gpuwhy.analysis import whatif
from gpuwhy.analysis.context import RunContext
from gpuwhy.analysis.framework import pick
from gpuwhy.analysis.ranks import RankPhase
from gpuwhy.analysis.rules.common import r
from gpuwhy.model import Finding, Severity

LAG_FRACTION = 0.10  # TraceML summary diagnosis: straggler_skew_warn
MIN_STEPS = 20  # TraceML summary diagnosis: min_steps_for_diag
REFERENCE = "TraceML post-run straggler rule: worst rank >= 10 % over the median, >= 20 steps"

FIXES = {
    "torch": (
        "Give {rank}'s input the speed of the others': more `DataLoader(num_workers=...)` "
        "workers on it (and `pin_memory=True`), its shard on storage as fast as theirs, and no "
        "other work on its node's CPUs; every rank should read the same number of equally "
        "costly samples (`DistributedSampler`)."
    ),
    "tensorflow": (
        "Give {rank}'s input the speed of the others': `num_parallel_calls=tf.data.AUTOTUNE` "
        "and `.prefetch(tf.data.AUTOTUNE)` in its pipeline, its shard on storage as fast as "
        "theirs, and no other work on its node's CPUs."
    ),
    "default": (
        "Give {rank}'s input the speed of the others': parallel, prefetching input on it, its "
        "shard on storage as fast as theirs, and no other work on its node's CPUs."
    ),
}


def check(ctx: RunContext) -> list[Finding]:
    train = ctx.training_phase()
    rows = ctx.ranks.get(train.name, ()) if train is not None else ()
    timed = [
        row
        for row in rows
        if row.wait_per_step_s is not None and row.cycle_s and row.steady_steps >= MIN_STEPS
    ]
    if train is None or len(timed) < 2:
        return []
    late = max(timed, key=_wait)
    others = [row for row in timed if row is not late]
    usual_wait = statistics.median(_wait(row) for row in others)
    cycle = statistics.median(row.cycle_s or 0.0 for row in timed)
    lag = _wait(late) - usual_wait
    if cycle <= 0 or lag / cycle < LAG_FRACTION:
        return []
    est = whatif.match_median_rank(
        ctx.duration_s, train.name, late.label, lag, min(row.steady_steps for row in timed)
    )
    where = _where(late)
    return [
        Finding(
            code="STRAGGLER",
            severity=Severity.WARNING,
            title=(
                f"{late.label}{where} is slow to load its input: {_waiting(others)} "
                f"{lag * 1000:.1f} ms for it every step ({lag / cycle:.0%} of the step)"
            ),
            evidence={
                "phase": train.name,
                "rank": late.rank,
                "pid": late.pid,
                "host": late.host,
                "gpu": late.device,
                "gpu_uuid": late.gpu_uuid,
                "cause": "input",
                "data_wait_per_step_s": r(_wait(late), 4),
                "median_rank_data_wait_per_step_s": r(usual_wait, 4),
                "others_wait_per_step_s": r(lag, 4),
                "step_cycle_s": r(cycle, 4),
                "lag_fraction": r(lag / cycle),
                "phase_speedup": r(cycle / max(cycle - lag, cycle * 0.001)),
                "ranks": len(timed),
                "threshold_fraction": LAG_FRACTION,
                "reference": REFERENCE,
            },
            fix=pick(ctx.framework, FIXES).format(rank=late.label),
            speedup=est.speedup,
            speedup_method=est.method,
        )
    ]


def _wait(row: RankPhase) -> float:
    return row.wait_per_step_s or 0.0


def _waiting(others: list[RankPhase]) -> str:
    return f"{others[0].label} waits" if len(others) == 1 else f"the other {len(others)} ranks wait"


def _where(row: RankPhase) -> str:
    parts = []
    if row.host:
        parts.append(f"on {row.host}")
    if row.device is not None:
        parts.append(f"GPU {row.device}")
    return f" ({', '.join(parts)})" if parts else ""
