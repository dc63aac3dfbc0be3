"""What-if models: how much faster the whole run gets if a finding's cause is fixed.

Every model says which seconds of the recorded run the fix removes (``saved_s``); the whole-run
speed-up is then Amdahl's law on measured time: ``run_s / (run_s - saved_s)``. Start-up, imports
and everything the fix does not touch stay as they were, so a 2x faster training phase in a run
that spends half its time importing frameworks is reported as 1.33x, not 2x.

Each model returns the speed-up together with the one-line method that every finding carries in
``speedup_method``; docs/findings.md derives each one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

HEALTHY_BUSY = 0.80
"""GPU busy fraction a well-fed job reaches: gpu-idle reports no finding at busy >= 80 %, and
NVIDIA's DCGM guidance calls SM activity >= 0.8 necessary for effective use
(references.md#dcgm-sm-activity)."""


@dataclass(frozen=True)
class WhatIf:
    """A whole-run speed-up and how it was obtained."""

    speedup: float
    method: str
    saved_s: float


def amdahl(run_s: float, saved_s: float) -> float:
    """Whole-run speed-up when ``saved_s`` of ``run_s`` seconds disappear."""
    if run_s <= 0:
        return 1.0
    saved_s = min(max(saved_s, 0.0), run_s * 0.999)  # never infinite: something always remains
    return run_s / (run_s - saved_s)


def _whatif(run_s: float, saved_s: float, method: str) -> WhatIf:
    return WhatIf(speedup=round(amdahl(run_s, saved_s), 3), method=method, saved_s=saved_s)


def remove_wait(run_s: float, wait_s: float, phase: str) -> WhatIf:
    """Input ready whenever a steady step asks for it (prefetching, parallel input): the wait
    goes. ``wait_s`` is the steady steps' wait: the first batch of a round, fetched while the
    pipeline starts, is waited for with the fix too."""
    return _whatif(
        run_s,
        wait_s,
        f"measured data wait of the steady steps in '{phase}' ({wait_s:.2f} s) removed; "
        f"whole run = run / (run - wait) (Amdahl)",
    )


def trace_once(run_s: float, phase: str, retraced_s: float, retraces: int) -> WhatIf:
    """Each step function traced and compiled once (tensors or arrays for changing values,
    fixed or dynamic shapes): the calls that did it again take a step's time, no more
    (analysis/steady.py). A lower bound: the framework keeps every function it traced until
    the job exits, and freeing them then takes time after the last step that no span covers
    (TensorFlow: 239 retraces, ~0.7 s more at exit; docs/findings.md, ONE_TIME_WORK)."""
    return _whatif(
        run_s,
        retraced_s,
        f"{retraces} calls that traced or compiled a step function again in '{phase}' "
        f"({retraced_s:.2f} s) removed; whole run by Amdahl; freeing the functions they made "
        "when the job exits is not counted, so the gain can be larger",
    )


def phase_speedup(steady_s: float, wait_s: float) -> float:
    """The phase's own steady-state speed-up when its steps' wait goes: the figure to check
    against the steady steps of the same job with the fix."""
    return round(amdahl(steady_s, wait_s), 3)


def fewer_validation_rounds(
    run_s: float, round_s: Sequence[float], resume_s: Sequence[float] = ()
) -> WhatIf:
    """Validate once, at the end, instead of once per round; with one round, the upper bound.

    ``resume_s`` is the time from each round's end until training resumed (the evaluation torn
    down): it goes with every round, since after the last validation no training resumes. The
    round kept is the longest: one-time costs (tracing, compiling the evaluation step, filling a
    cache) fall on the first round and stay whatever the frequency.
    """
    validation_s = sum(round_s) + sum(resume_s)
    rounds = len(round_s)
    if rounds >= 2:
        saved = validation_s - max(round_s)
        method = (
            f"validation run once, at the end, instead of {rounds} times "
            f"(validation_freq={rounds}): {saved:.2f} s of {validation_s:.2f} s saved (every "
            "round and the teardown before training resumed, but the longest round); "
            "whole run by Amdahl"
        )
    else:
        saved = validation_s
        method = (
            f"upper bound: all {validation_s:.2f} s of validation removed "
            "(a smaller validation set saves its share of this); whole run by Amdahl"
        )
    return _whatif(run_s, saved, method)


def match_busier_phase(
    run_s: float, phase: str, phase_s: float, util_pct: float, busy_util_pct: float, busy: str
) -> WhatIf:
    """The idle phase does its GPU work as densely as the busy one does."""
    saved = phase_s * (1 - util_pct / busy_util_pct) if busy_util_pct > 0 else 0.0
    return _whatif(
        run_s,
        saved,
        f"'{phase}' keeps the GPU as busy as '{busy}' ({util_pct:.0f} % -> {busy_util_pct:.0f} %):"
        f" its time x {util_pct:.0f}/{busy_util_pct:.0f}; whole run by Amdahl",
    )


def feed_gpu(run_s: float, phase: str, phase_s: float, util_pct: float) -> WhatIf:
    """Host overhead cut until the GPU is busy at the healthy level (80 %), no further."""
    busy = util_pct / 100.0
    saved = phase_s * (1 - busy / HEALTHY_BUSY) if busy < HEALTHY_BUSY else 0.0
    return _whatif(
        run_s,
        saved,
        f"'{phase}' shortened until the GPU is {HEALTHY_BUSY:.0%} busy (now {util_pct:.0f} %): "
        f"its time x {busy:.2f}/{HEALTHY_BUSY:.2f}; whole run by Amdahl",
    )


def overlap_transfers(run_s: float, phase: str, phase_s: float, transfer_fraction: float) -> WhatIf:
    """Copies overlapped with compute (pinned memory, async copies): their link time leaves the
    critical path."""
    saved = phase_s * transfer_fraction
    return _whatif(
        run_s,
        saved,
        f"PCIe copy time in '{phase}' ({transfer_fraction:.0%} of it, bytes / link bandwidth) "
        "overlapped with compute; whole run by Amdahl",
    )


def pin_copies(
    run_s: float,
    phase: str,
    phase_s: float,
    copy_s: float,
    link_s: float | None,
    util_pct: float | None,
) -> WhatIf:
    """Copies from pinned memory, queued without waiting (`non_blocking=True`): the host's time
    blocked in pageable copies goes, less what the bytes take at the link's full rate
    (``link_s``, which the device still spends), and never more than the phase's time the GPU
    ran no kernel (what the blocked time also held: the stream's queued kernels it waited for
    stay)."""
    saved = copy_s - (link_s or 0.0)
    idle_s = None if util_pct is None else phase_s * (1 - util_pct / 100.0)
    if idle_s is not None:
        saved = min(saved, idle_s)
    link = f", less {link_s:.2f} s for the bytes at the link's rate" if link_s else ""
    idle = f", at most the {idle_s:.2f} s the GPU ran no kernel" if idle_s is not None else ""
    return _whatif(
        run_s,
        saved,
        f"the host's {copy_s:.2f} s blocked in pageable copies in '{phase}' removed{link}{idle};"
        " whole run by Amdahl",
    )


def full_clocks(
    run_s: float, phase: str, phase_s: float, util_pct: float, clock_mhz: float, max_mhz: float
) -> WhatIf:
    """GPU-busy time shrinks in proportion to the SM clock regained."""
    busy = util_pct / 100.0
    saved = phase_s * busy * (1 - clock_mhz / max_mhz) if max_mhz > 0 else 0.0
    return _whatif(
        run_s,
        saved,
        f"GPU-busy time in '{phase}' ({busy:.0%}) scaled by SM clock {clock_mhz:.0f} -> "
        f"{max_mhz:.0f} MHz; whole run by Amdahl",
    )


def use_all_gpus(run_s: float, phase: str, phase_s: float, used: int, total: int) -> WhatIf:
    """Upper bound: the phase spread over every GPU with perfect (linear) data-parallel scaling."""
    saved = phase_s * (1 - used / total) if total > 0 else 0.0
    return _whatif(
        run_s,
        saved,
        f"upper bound: '{phase}' scaled linearly from {used} to {total} GPUs; whole run by Amdahl",
    )


def balance_gpus(
    run_s: float, phase: str, phase_s: float, mean_pct: float, max_pct: float
) -> WhatIf:
    """Work spread evenly: synchronous steps finish when the busiest GPU does, so the phase
    shrinks from the busiest GPU's load to the mean load."""
    saved = phase_s * (1 - mean_pct / max_pct) if max_pct > 0 else 0.0
    return _whatif(
        run_s,
        saved,
        f"'{phase}' with work spread evenly: time x mean/max GPU load "
        f"({mean_pct:.0f}/{max_pct:.0f} %); whole run by Amdahl",
    )


def match_median_rank(
    run_s: float, phase: str, rank: str, lag_per_step_s: float, steps: int
) -> WhatIf:
    """The late rank as quick as the median rank: the others stop waiting for it at every
    step's collective, so each steady step loses the lag (``lag_per_step_s``). A lower bound: a
    rank late to the collectives also runs them slower than a balanced job (docs/distributed.md),
    which no wait shows."""
    return _whatif(
        run_s,
        lag_per_step_s * steps,
        f"{rank} as quick as the median rank: {lag_per_step_s * 1000:.1f} ms of every steady "
        f"step of '{phase}' ({steps} steps) no longer waited for; whole run by Amdahl; what "
        "its late arrival costs the collectives beyond its wait is not counted, so the gain "
        "can be larger",
    )


def warm_up_once(run_s: float, phase: str, repeated_s: float, rounds: int) -> WhatIf:
    """Per-round start-up paid once: ``repeated_s`` is what the ``rounds`` warmed rounds spent
    on warm-up steps and waits for the input to end, beyond the costliest round's, which stays."""
    return _whatif(
        run_s,
        repeated_s,
        f"warm-up of '{phase}' paid once instead of in {rounds} rounds: the warm-up steps and "
        f"waits for the input to end of all but the costliest round ({repeated_s:.2f} s) "
        "saved; whole run by Amdahl",
    )
