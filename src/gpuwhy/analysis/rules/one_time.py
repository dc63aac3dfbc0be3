"""ONE_TIME_WORK: a phase spends much of its time outside its steady steps.

Steady steps and the one-time work around them come from steady.py: warm-up steps (tracing,
compiling, an input pipeline starting), the lead-in before a round's first step and the tail
after its last. The bands are the ones INPUT_BOUND uses for a cost's share (XProf's input
pipeline analyzer, references.md#xprof-input-pipeline): >= 20 % of the phase, and >= 5 % of the
run so a short phase's start-up is not raised as a finding worth a 1 % gain. XProf's overview
page uses the same 20 % for tf.function calls that were expensive "due to either retracing or
eager execution" (references.md#xprof-overview-retracing).

Warm-up repeated in several rounds (every epoch, every `fit`) is work a change removes: the
estimate keeps the costliest round's warm-up (the first compile, the first cache fill) and saves
the others', with the waits for the input to end that come with them (workers started and
stopped every epoch). It is the finding's subject when those repeats are >= 5 % of the run.
The rest is what a job pays to start; it is reported, without an estimate, when it dominates a
short job. A cold first round (steady.py: an epoch filling a cache, reading files for the first
time) is paid once per run too: when it is most of the one-time work, the finding says so and
its fix is to pay it once across runs.
"""

from __future__ import annotations

from gpuwhy.analysis import whatif
from gpuwhy.analysis.context import RunContext
from gpuwhy.analysis.framework import pick
from gpuwhy.analysis.rules.common import r
from gpuwhy.model import Finding, Severity

PHASE_FRACTION = 0.20
RUN_FRACTION = 0.05
MIN_RETRACES = 2
REFERENCE = (
    "XProf: a cost >= 20 % of step time is high (input pipeline); tf.function calls >= 20 % "
    "expensive are listed as retracing (overview page); gpuprof: a first step > 3x the median "
    "is compilation warm-up"
)

RECURRING_FIXES = {
    "keras": (
        "Build once: call `fit` once with `epochs=N` instead of `fit` in a loop (each call "
        "makes its train function and input iterator again, and traces or compiles it on "
        "its first step); within one `fit`, a finite dataset gets a new iterator every "
        "epoch: `fit(ds.repeat(), steps_per_epoch=N)` keeps one across epochs; "
        "`validation_freq` rather than `evaluate` in a loop."
    ),
    "tensorflow": (
        "Build and trace once: call `fit` once with `epochs=N` instead of `fit` in a loop (each "
        "call makes and traces its train function and input iterator again; within one `fit`, "
        "`fit(ds.repeat(), steps_per_epoch=N)` keeps one iterator across epochs); in a custom loop "
        "keep one `tf.function` and pass it tensors, not Python numbers, so it is not retraced "
        "(`@tf.function(reduce_retracing=True)`)."
    ),
    "torch": (
        "Keep the input workers between epochs: `DataLoader(..., persistent_workers=True)`; with "
        "`torch.compile`, keep batch shapes fixed (`drop_last=True`) or pass `dynamic=True` so "
        "a new shape does not compile again."
    ),
    "jax": (
        "Jit the step once, outside the loop, and keep input shapes fixed (pad or drop the last "
        "batch): each new shape compiles again."
    ),
    "default": (
        "Do once what every round repeats: one `fit(epochs=N)` instead of `fit` in a loop, "
        "`DataLoader(persistent_workers=True)`, step functions traced or compiled once, with "
        "fixed input shapes."
    ),
}

FIRST_ROUND_FIXES = {
    "tensorflow": (
        "This is start-up (tracing the train function, starting the input pipeline); it weighs "
        "on short jobs only. To cut it: `jit_compile=False` if XLA compiles slowly, and fewer "
        "distinct input shapes."
    ),
    "torch": (
        "This is start-up (starting DataLoader workers, `torch.compile`); it weighs on short "
        "jobs only. To cut it: fewer workers for a short job, or `torch.compile` off for runs "
        "this short."
    ),
    "jax": (
        "This is compilation; keep it across runs with the persistent cache: "
        "`jax.config.update('jax_compilation_cache_dir', '/path/to/cache')`."
    ),
    "default": (
        "This is start-up (tracing, compiling, starting the input); it weighs on short jobs "
        "only: it is paid once, not per step."
    ),
}


COLD_ROUND_FIXES = {
    "tensorflow": (
        "The first epoch fills what later epochs reuse (`cache()`, the OS file cache): it is "
        "paid once per run. To pay it once across runs, cache to a file "
        "(`ds.cache('/path/to/cache')`) or save the prepared dataset once (`ds.save(path)`, "
        "then `tf.data.Dataset.load(path)`)."
    ),
    "torch": (
        "The first epoch reads what later epochs find cached (files now in the OS page cache, "
        "items a Dataset keeps): it is paid once per run. To pay it once across runs, prepare "
        "the data once and save the tensors (`torch.save`), or keep it on local fast storage."
    ),
    "default": (
        "The first round fills what later rounds reuse (a cache, the OS file cache): it is paid "
        "once per run. To pay it once across runs, save the prepared data once and load it."
    ),
}

_JAX_RETRACE_FIX = (
    "Keep the jitted step's input shapes fixed (pad the last batch, or drop it) and pass "
    "changing Python values as arrays rather than static arguments (`static_argnums`): each "
    "new shape or static value compiles the function again."
)
RETRACE_FIXES = {
    "tensorflow": (
        "Call the tf.function with tensors, not Python numbers or new Python objects "
        "(`step(x, tf.constant(rate))`): each new Python value traces it again. Keep batch "
        "shapes fixed (`dataset.batch(n, drop_remainder=True)`), or let one trace take any "
        "size: `@tf.function(reduce_retracing=True)` or an `input_signature` with `None` for "
        "the batch."
    ),
    "jax": _JAX_RETRACE_FIX,
    "keras-jax": _JAX_RETRACE_FIX,
    "torch": (
        "Keep the compiled model's input shapes fixed (`DataLoader(..., drop_last=True)`, "
        "padding) or let one compile take any size (`torch.compile(model, dynamic=True)`), and "
        "pass numbers that change as tensors: each new shape or specialised value compiles it "
        "again, up to `torch._dynamo.config.recompile_limit`, after which it runs uncompiled."
    ),
    "default": (
        "Keep the compiled step's input shapes and Python arguments the same from call to "
        "call (fixed batch shapes, tensors or arrays for changing values): each new one traces "
        "and compiles it again."
    ),
}
RETRACED = {
    "tensorflow": "traced its tf.function",
    "jax": "compiled its jitted function",
    "keras-jax": "compiled its step function",
    "torch": "compiled its torch.compile'd code",
    "default": "traced or compiled its step function",
}

START_UP_METHOD = "not estimated: start-up paid once, whose cost depends on the framework's build"


def check(ctx: RunContext) -> list[Finding]:
    """One finding per phase whose one-time work is >= 20 % of it and >= 5 % of the run."""
    findings = []
    for phase in ctx.named_phases:
        if not phase.steps or phase.time_s <= 0 or ctx.duration_s <= 0:
            continue
        fraction = phase.one_time_s / phase.time_s
        if fraction < PHASE_FRACTION or phase.one_time_s / ctx.duration_s < RUN_FRACTION:
            continue
        # Work a change removes: what rounds other than the costliest repeat, when it matters
        # to the run as a whole (the band above); the rest is the job's start-up.
        recurring = phase.repeated_warmup_s / ctx.duration_s >= RUN_FRACTION
        # One retrace is a second shape (a smaller last batch), paid once per run as the first
        # trace is; more are the pattern a change removes.
        retraced = (
            phase.retraces >= MIN_RETRACES and phase.retraced_s / ctx.duration_s >= RUN_FRACTION
        )
        cold = phase.cold_round_s >= phase.one_time_s / 2
        evidence = {
            "phase": phase.name,
            "one_time_fraction": r(fraction),
            "one_time_s": r(phase.one_time_s),
            "warmup_s": r(phase.warmup_s),
            "warmup_steps": phase.warmup_steps,
            "cold_round_s": r(phase.cold_round_s),
            "cold_round_steps": phase.cold_round_steps,
            "rounds_warmed": phase.rounds_warmed,
            "repeated_warmup_s": r(phase.repeated_warmup_s),
            "rounds": phase.rounds,
            "lead_in_s": r(phase.lead_in_s),
            "input_end_s": r(phase.input_end_s),
            "steady_time_s": r(phase.steady_time_s),
            "steady_steps": phase.steady_steps,
            "step_time_p50_s": r(phase.step_time_p50_s, 4),
            "phase_time_s": r(phase.time_s),
            "reference": REFERENCE,
        }
        if phase.retraces:
            evidence["retraces"] = phase.retraces
            evidence["retraced_s"] = r(phase.retraced_s)
        fix = None
        if retraced:
            est = whatif.trace_once(ctx.duration_s, phase.name, phase.retraced_s, phase.retraces)
            title = (
                f"'{phase.name}' {pick(ctx.framework, RETRACED)} again {phase.retraces} times: "
                f"{phase.retraced_s / phase.time_s:.0%} of its time"
            )
            fix = pick(ctx.framework, RETRACE_FIXES)
        elif recurring:
            est = whatif.warm_up_once(
                ctx.duration_s, phase.name, phase.repeated_warmup_s, phase.rounds_warmed
            )
            title = (
                f"'{phase.name}' warms up again in {phase.rounds_warmed} rounds: "
                f"{fraction:.0%} of its time is one-time work (tracing, compiling, input start-up)"
            )
            fixes = RECURRING_FIXES
        elif cold:
            title = (
                f"'{phase.name}' spends {fraction:.0%} of its time on one-time work, most of it "
                "a first round slower than the later ones (a cache being filled, files read for "
                "the first time)"
            )
            fixes = COLD_ROUND_FIXES
        else:
            title = (
                f"'{phase.name}' spends {fraction:.0%} of its time on one-time work "
                "(tracing, compiling, input start-up) before its steps settle"
            )
            fixes = FIRST_ROUND_FIXES
        removable = recurring or retraced
        findings.append(
            Finding(
                code="ONE_TIME_WORK",
                severity=Severity.WARNING if removable else Severity.INFO,
                title=title,
                evidence=evidence,
                fix=fix or pick(ctx.framework, fixes),
                speedup=est.speedup if removable else None,
                speedup_method=est.method if removable else START_UP_METHOD,
            )
        )
    return findings
