"""Kernel-aware findings from a rank's steps: INPUT_BOUND (exposed wait only), LAUNCH_BOUND or
HOST_BOUND (the device waits for the host), SYNC_BOUND and PAGEABLE_COPY. A trace without step
markers gets INPUT_BOUND and PAGEABLE_COPY, whose waits the trace times itself, and HOST_BOUND
said without an estimate (`window_host_wait`).

Shares are of the profiled steps' summed time, as the phase table's; speed-ups are Amdahl's over
those steps: their time over their time less the idle the fix removes. Kernel sizes are medians.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from gpuwhy.analysis.kernels.steps import LAUNCH_GAP_NS, RankFacts, StepFacts
from gpuwhy.analysis.rules.host import HOST_FIXES, LOW_UTIL_PCT, SYNC_FIXES
from gpuwhy.analysis.rules.input_bound import FIXES as INPUT_FIXES
from gpuwhy.analysis.rules.input_bound import HIGH_FRACTION, MODERATE_FRACTION
from gpuwhy.analysis.rules.input_bound import REFERENCE as INPUT_REFERENCE
from gpuwhy.analysis.rules.pageable import FIX as PAGEABLE_FIX
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


def who(facts: RankFacts) -> str:
    """ "rank 3: " in a multi-rank trace; nothing for a single trace without rank."""
    return f"rank {facts.trace.rank}: " if facts.trace.rank is not None else ""


def _mean_ms(steps: Sequence[StepFacts], part: Callable[[StepFacts], int]) -> float:
    return sum(part(s) for s in steps) / len(steps) / 1e6 if steps else 0.0


def _r(value: float, digits: int = 3) -> float:
    return round(value, digits)


def _span(facts: RankFacts) -> str:
    """What the shares are of: the steps, or the one window of a trace without step markers."""
    return "the steps' time" if facts.marked else "the traced window (no step markers)"


def _input_fix(facts: RankFacts) -> str:
    """The fix for the loader the trace shows: Keras's data adapters (traced Python: the only
    `$file:line` events kept as loader calls, traces/xplane.py), tf.data's iterator, else
    torch's DataLoader (Kineto's `enumerate(DataLoader)`)."""
    names = [call.name for call in facts.trace.loader]
    if any(name.startswith("$") for name in names):
        return INPUT_FIXES["keras-jax"]
    if any(name.startswith("IteratorGetNext") for name in names):
        return INPUT_FIXES["tensorflow"]
    return INPUT_FIXES["torch"]


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
            f"{who(facts)}the GPU idles {fraction:.0%} of {_span(facts)} while the host "
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
        fix=_input_fix(facts),
        speedup=speedup,
        speedup_method=(
            "the device's idle time inside the data loader's calls removed from each step "
            "(the loading the device overlapped with queued kernels costs nothing); "
            "median step before over median step after"
        ),
    )


def _launch_gap_ns(step: StepFacts) -> int:
    """Host-wait idle not explained by data loading or blocking syncs: launch overhead."""
    return max(step.host_wait_ns - step.loader_exposed_ns - step.sync_idle_ns, 0)


LAUNCH_SHARE = 0.5
"""At least half of the device's wait for the host must come in per-op gaps (shorter than
LAUNCH_GAP_NS: the host issuing the next operator) to call it launch overhead; below, most of
the wait is long stretches of other host work (Python, CPU preprocessing, logging)."""


def _short_gap_ns(step: StepFacts) -> int:
    """Of the launch gap, the part in per-op gaps."""
    return min(step.host_wait_short_ns, _launch_gap_ns(step))


def _short_share(steps: Sequence[StepFacts]) -> float:
    """The share of the steps' launch gaps in per-op gaps."""
    gap_ns = sum(_launch_gap_ns(s) for s in steps)
    return sum(_short_gap_ns(s) for s in steps) / gap_ns if gap_ns else 0.0


def host_wait(facts: RankFacts, phase: str) -> Finding | None:
    """The device idles, waiting for the host to launch its next work: LAUNCH_BOUND when the
    wait is the host issuing short kernels one by one (many short gaps, kernels shorter than
    their launch call: eager dispatch and launch), else HOST_BOUND (long stretches of other host
    work). The launch calls alone are a small part of an eager framework's per-op cost, so
    their share of the wait is evidence, not the test."""
    steps = facts.steps
    trace = facts.trace
    if not steps or not facts.has_device_work or not trace.launch_calls:
        return None
    fraction = _fraction(steps, _launch_gap_ns)
    if fraction < LAUNCH_HIGH_FRACTION:
        return None
    gap_ns = sum(_launch_gap_ns(s) for s in steps)
    launch_share = min(sum(s.launch_ns for s in steps) / gap_ns, 1.0) if gap_ns else 0.0
    short_share = _short_share(steps)
    launch_call_us = trace.launch_call_ns / trace.launch_calls / 1000
    medians = [s.kernel_median_ns for s in steps if s.kernel_median_ns is not None]
    kernel_us = _median(medians) / 1000
    launch = short_share >= LAUNCH_SHARE and kernel_us < launch_call_us
    kernels = _median([s.kernels for s in steps])
    evidence = {
        "phase": phase,
        "rank": trace.rank,
        "host_wait_fraction": _r(fraction),
        "launch_call_share_of_wait": _r(launch_share),
        "short_gap_share_of_wait": _r(short_share),
        "short_gap_ms": LAUNCH_GAP_NS / 1e6,
        "kernels_per_step": kernels,
        "kernel_median_us": _r(kernel_us, 2),
        "launch_call_mean_us": _r(launch_call_us, 2),
        "step_time_ms": _r(_median([s.time_ns / 1e6 for s in steps]), 2),
        "gpu_busy": _r(_fraction(steps, lambda s: s.time_ns - s.idle_ns)),
        "threshold_fraction": LAUNCH_HIGH_FRACTION,
        "reference": LAUNCH_REFERENCE,
    }
    method = (
        "at most: the device's waits for the host (outside data loading and syncs) removed from "
        "each step, as if the step's work were queued at once"
    )
    if launch:
        return Finding(
            code="LAUNCH_BOUND",
            severity=Severity.WARNING,
            title=(
                f"{who(facts)}the GPU waits for the host to launch kernels {fraction:.0%} of "
                f"the steps' time ({kernels:.0f} short kernels a step)"
            ),
            evidence=evidence,
            fix=LAUNCH_FIX,
            speedup=_speedup(steps, _launch_gap_ns),
            speedup_method=method,
        )
    return Finding(
        code="HOST_BOUND",
        severity=Severity.WARNING,
        title=(
            f"{who(facts)}the GPU waits for the host {fraction:.0%} of the steps' time, "
            + (
                f"{short_share:.0%} of it in short gaps between operators: the host's Python "
                "and dispatch per operator take longer than the kernels"
                if short_share >= LAUNCH_SHARE
                else f"{1 - short_share:.0%} of it in gaps of {LAUNCH_GAP_NS / 1e6:g} ms or "
                "more: the host is busy with other work than launching kernels"
            )
        ),
        evidence=evidence,
        fix=HOST_FIXES["torch"]
        + " With the profiler on, its own overhead (`with_stack`, `profile_memory`) adds host "
        "time: profile again without them to confirm.",
        speedup=_speedup(steps, _launch_gap_ns),
        speedup_method=method,
    )


SYNC_REFERENCE = "Nsight Systems cuda_api_sync rule; XProf high band (>= 15 %) for host time"


def _synced_steps(steps: Sequence[StepFacts]) -> int:
    return sum(1 for s in steps if s.sync_ns > 0)


def sync_bound(facts: RankFacts, phase: str) -> Finding | None:
    """The host blocks on the device inside the steps, and the device then idles until the host
    has launched again: host and device take turns."""
    steps = facts.steps
    if not steps or not facts.has_device_work:
        return None
    fraction = _fraction(steps, lambda s: s.sync_idle_ns)
    if fraction < LAUNCH_HIGH_FRACTION or 2 * _synced_steps(steps) < len(steps):
        return None
    calls = [c.name for c in facts.trace.syncs]
    return Finding(
        code="SYNC_BOUND",
        severity=Severity.WARNING,
        title=(
            f"{who(facts)}the host waits for the GPU inside the steps, then the GPU idles "
            f"{fraction:.0%} of the steps' time until the host launches again"
        ),
        evidence={
            "phase": phase,
            "rank": facts.trace.rank,
            "sync_idle_fraction": _r(fraction),
            "sync_ms_per_step": _r(_mean_ms(steps, lambda s: s.sync_ns), 2),
            "synced_step_fraction": _r(_synced_steps(steps) / len(steps)),
            "sync_calls": sorted(set(calls)),
            "step_time_ms": _r(_median([s.time_ns / 1e6 for s in steps]), 2),
            "threshold_fraction": LAUNCH_HIGH_FRACTION,
            "reference": SYNC_REFERENCE,
        },
        fix=SYNC_FIXES["torch"],
        speedup=_speedup(steps, lambda s: s.sync_idle_ns),
        speedup_method=(
            "the device's idle gaps that began inside a blocking sync removed from each step "
            "(the host would have queued the next work while the device ran)"
        ),
    )


PAGEABLE_REFERENCE = (
    "Nsight Systems cuda_memcpy_async rule (pageable copies block; use pinned memory); "
    "XProf counts host-to-device time as input time (>= 5 % moderate, >= 20 % high)"
)


def pageable_copy(facts: RankFacts, phase: str) -> Finding | None:
    """Host<->device copies from pageable memory take a share of the steps: they block the
    host and cannot overlap with compute."""
    steps = facts.steps
    if not steps or not facts.has_device_work:
        return None
    fraction = _fraction(steps, lambda s: s.pageable_copy_ns)
    if fraction < MODERATE_FRACTION:
        return None
    high = fraction >= HIGH_FRACTION
    timed = all(s.pageable_pinned_ns is not None for s in steps)  # copy_rate.py
    speedup, method = _pinned_speedup(facts, timed)
    return Finding(
        code="PAGEABLE_COPY",
        severity=Severity.WARNING if high else Severity.INFO,
        title=(
            f"{who(facts)}copies from pageable host memory take {fraction:.0%} of "
            f"{_span(facts)} on the GPU"
        ),
        evidence={
            "phase": phase,
            "rank": facts.trace.rank,
            "pageable_copy_fraction": _r(fraction),
            "not_under_compute_fraction": _r(_fraction(steps, lambda s: s.pageable_copy_alone_ns)),
            "pageable_copy_ms_per_step": _r(_mean_ms(steps, lambda s: s.pageable_copy_ns), 2),
            "pinned_copy_ms_per_step": (
                _r(_mean_ms(steps, lambda s: round(s.pageable_pinned_ns or 0)), 2)
                if timed
                else None
            ),
            "pinned_rate_gb_s": {
                way: {"rate": _r(r.bytes_per_ns, 1), "from": r.source}
                for way, r in sorted(facts.pinned_rates.items())
            },
            "band": "high" if high else "moderate",
            "threshold_fraction": HIGH_FRACTION if high else MODERATE_FRACTION,
            "reference": PAGEABLE_REFERENCE,
        },
        fix=PAGEABLE_FIX,
        speedup=speedup,
        speedup_method=method,
    )


def _pinned_speedup(facts: RankFacts, timed: bool) -> tuple[float, str]:
    """PAGEABLE_COPY's speed-up and how it was made. With the fix, the next step's copies run
    from pinned memory on a side stream while this step computes: a step takes the longer of
    its other work and its copies at the pinned rate. Without that rate for every step's copies
    (``timed``, copy_rate.py), the copies are taken as free: an upper bound."""
    steps = facts.steps
    if not timed:
        return _speedup(steps, lambda s: s.pageable_copy_alone_ns), (
            "at most: the pageable copies' time not hidden under compute removed (pinned, "
            "asynchronous copies on their own stream); the pinned copies' own time not "
            "counted: this trace gives no copy sizes, or neither a pinned rate nor the link's"
        )
    rates = sorted({f"{r.bytes_per_ns:.1f} GB/s ({r.source})" for r in facts.pinned_rates.values()})
    speedup = _speedup(
        steps,
        lambda s: max(
            0, min(s.pageable_copy_alone_ns, s.time_ns - round(s.pageable_pinned_ns or 0))
        ),
    )
    return speedup, (
        "each step the longer of its other work and its copies from pinned memory, on a "
        f"side stream one step ahead, at {', '.join(rates)}"
    )


COMMS_FIX = (
    "Overlap the collectives with compute: keep DDP's overlap with the backward pass (bucket "
    "gradients: `DistributedDataParallel(model, bucket_cap_mb=50, gradient_as_bucket_view=True)`);"
    " FSDP: `backward_prefetch=BackwardPrefetch.BACKWARD_PRE, forward_prefetch=True`; accumulate "
    "gradients over N micro-batches inside `with model.no_sync():` so the all-reduce runs once "
    "per N; check the interconnect NCCL uses (`NCCL_DEBUG=INFO`: NVLink/InfiniBand, not sockets)."
    " A collective also waits for the slowest rank: compare the ranks' compute per step."
)
COMMS_REFERENCE = (
    "XProf device-collectives band (>= 3 % moderate, >= 15 % high); HTA communication/compute "
    "overlap"
)


def exposed_comms(facts: RankFacts, phase: str) -> Finding | None:
    """Collectives run with no compute beside them: the step waits for the network (or for the
    slowest rank, which the collective also waits for)."""
    steps = facts.steps
    if not steps or not facts.has_device_work:
        return None
    fraction = _fraction(steps, lambda s: s.communication_ns - s.comm_overlap_ns)
    if fraction < LAUNCH_HIGH_FRACTION:
        return None
    comm = sum(s.communication_ns for s in steps)
    return Finding(
        code="EXPOSED_COMMS",
        severity=Severity.WARNING,
        title=(
            f"{who(facts)}collectives run with no compute beside them {fraction:.0%} of the "
            "steps' time"
        ),
        evidence={
            "phase": phase,
            "rank": facts.trace.rank,
            "world_size": facts.trace.world_size,
            "exposed_comm_fraction": _r(fraction),
            "comm_fraction": _r(_fraction(steps, lambda s: s.communication_ns)),
            "comm_overlap": _r(sum(s.comm_overlap_ns for s in steps) / comm) if comm else None,
            "step_time_ms": _r(_median([s.time_ns / 1e6 for s in steps]), 2),
            "threshold_fraction": LAUNCH_HIGH_FRACTION,
            "reference": COMMS_REFERENCE,
        },
        fix=COMMS_FIX,
        speedup=_speedup(steps, lambda s: s.communication_ns - s.comm_overlap_ns),
        speedup_method=(
            "at most: the communication not covered by compute hidden under it (the step as "
            "long as its compute); the collectives' wait for slower ranks is part of it"
        ),
    )


WINDOW_HOST_FIX = (
    "Mark the steps to learn which host work the GPU waits for (its input, Python between "
    "operators, kernel launches): profile with a schedule and `prof.step()`, "
    '`tf.profiler.experimental.Trace("train", step_num=n, _r=1)` or '
    '`jax.profiler.StepTraceAnnotation("train", step_num=n)` around each step, or run the job '
    "under `gpuwhy run --profile`. If the loop reads or builds its own batches (a generator, "
    "a file read), that is the likeliest wait: load them beside the steps (a prefetching "
    "iterator, loader workers, a tf.data pipeline)."
)


WINDOW_HOST_REFERENCE = (
    "XProf kernel-launch band (>= 15 % high); Nsight Systems 'GPU Low Utilization' (< 50 %)"
)


def window_host_wait(facts: RankFacts, phase: str) -> Finding | None:
    """A trace without step markers whose device mostly waits for the host, outside the
    loader's calls and blocking syncs: said, never estimated. The one window holds start-up and
    pauses beside the steps' own host work, and nothing tells them apart, so neither the cause
    (input, Python, launches) nor what a fix saves is known; marking steps tells both."""
    steps = facts.steps
    if facts.marked or not steps or not facts.has_device_work:
        return None
    fraction = _fraction(steps, _launch_gap_ns)
    if fraction < LAUNCH_HIGH_FRACTION:
        return None
    busy = _fraction(steps, lambda s: s.time_ns - s.idle_ns)
    short_share = _short_share(steps)
    return Finding(
        code="HOST_BOUND",
        # A GPU busy under half the window is low by Nsight Systems' bar, whatever the cause.
        severity=Severity.WARNING if busy * 100 < LOW_UTIL_PCT else Severity.INFO,
        title=(
            f"{who(facts)}the GPU waits for the host {fraction:.0%} of the traced window "
            "(no step markers: start-up and pauses count too), "
            + (
                f"{short_share:.0%} of it in short gaps between operators: the host's Python "
                "and dispatch per operator"
                if short_share >= LAUNCH_SHARE
                else f"{1 - short_share:.0%} of it in gaps of {LAUNCH_GAP_NS / 1e6:g} ms or "
                "more: host work the trace does not name"
            )
        ),
        evidence={
            "phase": phase,
            "rank": facts.trace.rank,
            "host_wait_fraction": _r(fraction),
            "short_gap_share_of_wait": _r(short_share),
            "short_gap_ms": LAUNCH_GAP_NS / 1e6,
            "gpu_busy": _r(busy),
            "window_s": _r(sum(s.time_ns for s in steps) / 1e9, 3),
            "step_markers": False,
            "threshold_fraction": LAUNCH_HIGH_FRACTION,
            "reference": WINDOW_HOST_REFERENCE,
        },
        fix=WINDOW_HOST_FIX,
    )


CHECKS = (input_bound, host_wait, sync_bound, pageable_copy, exposed_comms)

WINDOW_CHECKS = (input_bound, pageable_copy, window_host_wait)
"""What a trace without step markers (one window, first device work to last) can say: the waits
the trace measures itself, inside the data loader's calls and in pageable copies, whose seconds
do not depend on where a step begins. The others read the device's gaps, which in such a window
hold start-up and pauses too: of those, only the device's wait for the host is said, with no
estimate. Over the window, pauses count as time: its speed-up is a lower bound of the steps'."""
