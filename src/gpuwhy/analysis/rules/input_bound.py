"""INPUT_BOUND: steps wait for their data.

Threshold (XProf Input Pipeline Analyzer, op_stats_to_input_pipeline_analysis.cc,
references.md#xprof-input-pipeline): >= 20 % of step time waiting for input is "HIGHLY input-bound",
5-20 % "MODERATELY". Measured on the phase's steady steps (one-time work such as tracing and
iterator start-up apart, steady.py) from the hooks' WAIT spans, so it needs no GPU samples and
holds on a CPU run. The moderate band is reported only where it matters for the run: the
wait must also be >= 5 % of the run's wall time (the same band applied to the whole run), so a short
phase's per-batch iterator overhead is not raised as a finding worth a 1 % gain. A phase of one
or two steps is held to that run gate in either band: with so few steps no warm-up step can be
told apart (steady.py needs a step 3x the median), so its wait may be all one-time start-up (an
evaluation's first batch starting the loader's workers), not a pipeline too slow for its steps.
The high band needs no run gate (a short try of a long job spends most of its wall time starting
up), but the fix must still matter to the work that repeats: the phase's steady wait must be
>= 5 % of all phases' steady time, so a validation of a few small batches, highly input-bound
but a sliver of each epoch, is not raised as a warning worth a fraction of a percent. No floor
is put on the wait's length: a tf.data cache read waiting a quarter of 0.4-ms steps (6.5 ms over
58 steady steps, tests/scenarios/test_cold_round.py) is as input-bound as the job's own clock
says.

Calls that traced or compiled the step again leave the steady time (steady.py): where nearly
every step retraces, what is left of the steps is their waits and little else (each retrace
also ran its step), and their wait's share of it says nothing of the steps as they run. The
wait must also be >= 5 % of the steady time with those retraces in it: a job whose every step
traces its function again for 34 ms and waits 0.3 ms for its batch read 87 % waiting on what
was left (tests/scenarios/scripts/tf_tape_retrace.py; 28 % with the retraces fixed), a fix of
62 ms in 8.4 s. ONE_TIME_WORK names the retraces.

The wait must also recur: where one step holds so much of it that the other steady steps
together wait less than the moderate band, it is a stall (a garbage collection or the scheduler
stopping the process partway through one read), not an input pipeline too slow for its steps:
nothing says it comes again, and loading in parallel is no fix for it. Measured on the zoo's
Keras-on-torch job under load: its 8-step evaluation of in-memory arrays read 0.50 waiting in one
run of twelve (0.04-0.12 in the others), the whole wait in a single pull.
"""

from __future__ import annotations

from typing import Any

from gpuwhy.analysis import whatif
from gpuwhy.analysis.context import RunContext
from gpuwhy.analysis.framework import pick
from gpuwhy.analysis.phases import PhaseStats
from gpuwhy.analysis.rules import input_pipeline
from gpuwhy.analysis.rules.common import phase_util, r
from gpuwhy.model import Finding, Severity

HIGH_FRACTION = 0.20  # XProf: "HIGHLY input-bound"
MODERATE_FRACTION = 0.05  # XProf: "MODERATELY input-bound"
REFERENCE = (
    "XProf input-pipeline analyzer: >= 20 % of step time waiting = highly, 5-20 % = moderately"
)

FIXES = {
    "tensorflow": (
        "Let tf.data prepare batches in parallel and ahead of the step: "
        "`ds = ds.map(fn, num_parallel_calls=tf.data.AUTOTUNE)"
        ".cache().prefetch(tf.data.AUTOTUNE)` (cache() after deterministic, expensive steps; "
        "`interleave(..., num_parallel_calls=tf.data.AUTOTUNE)` for file reads; "
        "a Python generator cannot run in parallel: move its work into `map`)."
    ),
    "keras-torch": (
        "Load batches in parallel: in your PyDataset call "
        "`super().__init__(workers=4, use_multiprocessing=True, max_queue_size=10)`, "
        "or pass a torch DataLoader with `num_workers=4, persistent_workers=True`."
    ),
    "keras-jax": (
        "Load batches in parallel: in your PyDataset call "
        "`super().__init__(workers=4, use_multiprocessing=True, max_queue_size=10)`, "
        "or feed a tf.data pipeline with `map(..., num_parallel_calls=tf.data.AUTOTUNE)"
        ".prefetch(tf.data.AUTOTUNE)`."
    ),
    "torch": (
        "Load batches in worker processes: `DataLoader(ds, batch_size=..., num_workers=4, "
        "persistent_workers=True, prefetch_factor=2, pin_memory=True)` "
        "(num_workers up to the free CPU cores; pin_memory with `.to(device, non_blocking=True)`); "
        "cache decoded samples if __getitem__ repeats expensive work."
    ),
    "jax": (
        "Prepare batches ahead of the step in another thread or process (tf.data or grain with "
        "parallel workers, then prefetch to the device)."
    ),
    "default": (
        "Prepare the next batches while the current step runs: tf.data "
        "`map(fn, num_parallel_calls=tf.data.AUTOTUNE)` and `.prefetch(tf.data.AUTOTUNE)`; "
        "PyTorch `DataLoader(num_workers=4, persistent_workers=True)`; Keras PyDataset "
        "`workers=4, use_multiprocessing=True`; cache preprocessing that repeats."
    ),
}


FEWEST_STEADY_STEPS = 3
"""The fewest steps in which steady.py can tell a warm-up step (> 3x the median) from the rest."""


def _steady_wait_s(phase: PhaseStats) -> float:
    """The wait of the steady steps (steady.py); all of it where none is steady."""
    if phase.steady_time_s:
        return phase.steady_data_wait_s
    return phase.data_wait_s


def _steady_s(phase: PhaseStats) -> float:
    """The phase's steady time (steady.py); all of it where none is steady."""
    return phase.steady_time_s or phase.time_s


def others_wait_fraction(phase: PhaseStats) -> float | None:
    """The share of the steady time that the steady steps waited, less the longest one step
    waited; None where too few steps tell a stall from a pattern (the run gate decides)."""
    steady_s = _steady_s(phase)
    if phase.steady_steps < FEWEST_STEADY_STEPS or steady_s <= 0:
        return None
    return max(_steady_wait_s(phase) - phase.steady_wait_longest_s, 0.0) / steady_s


def one_stall(phase: PhaseStats) -> bool:
    """Whether the phase's steady wait is one step's stall: the other steady steps together
    wait less than the moderate band of the steady time."""
    others = others_wait_fraction(phase)
    return others is not None and others < MODERATE_FRACTION


def _run_fraction(cost_s: float, duration_s: float) -> float:
    return cost_s / duration_s if duration_s > 0 else 0.0


def material(
    phase: PhaseStats, share: float, cost_s: float, duration_s: float, steady_run_s: float
) -> bool:
    """Whether an input cost of `cost_s` (a `share` of the phase's steady time) matters enough
    to be a finding: the run gate (the moderate band, and a phase of too few steps), the share
    of every phase's steady time, and of the phase's steps with their retraces in them."""
    if share < MODERATE_FRACTION:
        return False
    few_steps = phase.steps < FEWEST_STEADY_STEPS
    run_fraction = _run_fraction(cost_s, duration_s)
    if (few_steps or share < HIGH_FRACTION) and run_fraction < MODERATE_FRACTION:
        return False
    if steady_run_s <= 0 or cost_s < MODERATE_FRACTION * steady_run_s:
        return False
    # A sliver of the steps as they run, their retraces in them, is not the input's.
    return cost_s >= MODERATE_FRACTION * (_steady_s(phase) + phase.retraced_s)


def held_back_as_stall(phase: PhaseStats, phases: list[PhaseStats], duration_s: float) -> bool:
    """Whether the phase's steady wait would be a finding but for being one step's stall
    (`one_stall`): the terminal report says so under its phase table."""
    fraction = phase.data_wait_fraction
    if phase.is_pseudo or fraction is None or not one_stall(phase):
        return False
    steady_run_s = sum(_steady_s(p) for p in phases if not p.is_pseudo)
    return material(phase, fraction, _steady_wait_s(phase), duration_s, steady_run_s)


def check(ctx: RunContext) -> list[Finding]:
    """One finding per phase whose steps wait for data >= 5 % of its time."""
    findings = []
    steady_run_s = sum(_steady_s(phase) for phase in ctx.named_phases)
    for phase in ctx.named_phases:
        fraction = phase.data_wait_fraction
        if fraction is None:
            continue
        pipeline = ctx.inputs.get(phase.name)
        steady_s = _steady_s(phase)
        wait_s = _steady_wait_s(phase)
        core_s = contended_s(ctx, phase, pipeline)
        cost_s = wait_s + core_s  # what the input costs the steps: their waits, the cores it took
        share = max(fraction, cost_s / steady_s) if core_s else fraction
        if not material(phase, share, cost_s, ctx.duration_s, steady_run_s):
            continue
        if not core_s and one_stall(phase):
            continue
        high = share >= HIGH_FRACTION
        steady_run_fraction = cost_s / steady_run_s
        est = whatif.remove_wait(ctx.duration_s, cost_s, phase.name)
        evidence: dict[str, Any] = {
            "phase": phase.name,
            "data_wait_fraction": r(fraction),
            "data_wait_s": r(wait_s),
            "run_wait_fraction": r(_run_fraction(cost_s, ctx.duration_s)),
            "phase_speedup": whatif.phase_speedup(steady_s, cost_s),
            "phase_time_s": r(phase.time_s),
            "steady_time_s": r(steady_s),
            "one_time_s": r(phase.one_time_s),
            "steps": phase.steps,
            "step_time_p50_s": r(phase.step_time_p50_s, 4),
            "gpu_util_pct": r(phase_util(ctx, phase), 1),
            "data_wait_coverage": r(phase.data_wait_coverage),
            "longest_step_wait_s": r(phase.steady_wait_longest_s),
            "wait_in_gc_s": r(phase.steady_wait_gc_s),
            "steady_run_wait_fraction": r(steady_run_fraction),
            "band": "high" if high else "moderate",
            "threshold_fraction": HIGH_FRACTION if high else MODERATE_FRACTION,
            "reference": REFERENCE,
        }
        if phase.steady_core_wait_s is not None:
            evidence["core_wait_s"] = r(phase.steady_core_wait_s)
        if core_s:
            evidence["input_core_wait_s"] = r(core_s)
            evidence["input_cost_fraction"] = r(share)
        fix = pick(ctx.framework, FIXES)
        method = est.method
        if pipeline:
            evidence["input"] = dict(pipeline)
            made, fix = input_pipeline.advise(pipeline, FIXES, fix)
            budget = _core_budget(ctx, phase.name, pipeline)
            speedup = evidence["phase_speedup"]
            if core_s:  # more workers would take more of the cores: cheaper batches first
                contended = input_pipeline.CONTENDED.format(share=core_s / steady_s)
                fix = contended + input_pipeline.CHEAPER
                method += (
                    f"; counts {core_s:.2f} s of the steps' thread waiting for a core the "
                    "input's workers took (their share of the other CPU use); the steps' "
                    "compute slowed by sharing the cores with them is not counted, so the gain "
                    "can be larger"
                )
            elif budget is not None and budget.ceiling < speedup:
                evidence["cores"] = budget.cores
                evidence["job_cpu_cores"] = r(budget.busy, 2)
                evidence["parallel_speedup_at_most"] = r(budget.ceiling)
                fix = input_pipeline.within_cores(pipeline, phase.name, budget, speedup, fix)
                method += (
                    f"; parallel loading alone: at most {budget.ceiling:.2f}x in '{phase.name}' "
                    f"(the job keeps {budget.busy:.1f} of {budget.cores} cores busy)"
                )
            if made is not None:  # what the job does now, then what to change
                evidence["input_made"] = made
                fix = f"Now {made}. {fix}"
        findings.append(
            Finding(
                code="INPUT_BOUND",
                severity=Severity.WARNING if high else Severity.INFO,
                title=(
                    f"'{phase.name}' steps wait for data, or for the cores their input's "
                    f"workers take, {share:.0%} of the time "
                    if core_s
                    else f"'{phase.name}' steps wait for data {fraction:.0%} of the time "
                )
                + f"({'highly' if high else 'moderately'} input-bound)",
                evidence=evidence,
                fix=fix,
                speedup=est.speedup,
                speedup_method=method,
            )
        )
    return findings


def contended_s(ctx: RunContext, phase: PhaseStats, pipeline: Any) -> float:
    """The steady steps' time waiting for a core that the input's worker processes took
    (input_pipeline.input_core_wait_s), where it reaches the moderate band of the steady time;
    else 0."""
    host = ctx.host.get(phase.name)
    core, ran = phase.steady_core_wait_s, phase.steady_thread_run_s
    if not pipeline or core is None or ran is None or host is None:
        return 0.0  # not read: not Linux, no hooks, no host sampler
    job, system = host.job_cpu_mean_pct, host.cpu_system_mean_pct
    if job is None or system is None or host.samples < input_pipeline.MIN_HOST_SAMPLES:
        return 0.0
    steady_s = _steady_s(phase)
    core_s = input_pipeline.input_core_wait_s(pipeline, steady_s, core, ran, job, system)
    return core_s if core_s >= MODERATE_FRACTION * steady_s else 0.0


def _core_budget(ctx: RunContext, phase: str, pipeline: Any) -> input_pipeline.CoreBudget | None:
    host = ctx.host.get(phase)
    if host is None:
        return None
    return input_pipeline.core_budget(pipeline, host.job_cpu_mean_pct, host.samples)
