"""HOST_BOUND and SYNC_BOUND: the GPU waits on the host although the data is there.

HOST_BOUND: while training, the job's GPUs are busy less than 50 % of the time (Nsight Systems
"GPU Low Utilization" threshold; torch-tb-profiler also advises a larger batch below 50 %,
references.md#torch-tb-profiler, references.md#nsight-rules) and the steps are not waiting for
input (data wait under XProf's 5 % band): the host cannot launch work fast enough — Python
overhead, kernel launches (5-40 µs each, references.md#nsight-rules), small batches.

An input the hooks did not time (a loop over tensors already in memory, an unhooked generator) is
reported too, saying that the wait was not measured: on an H200 a loop of batch-32 steps over
in-memory tensors kept the GPU 10 % busy and a 16× batch ran it 9× faster
(tests/data/gpu/2026-11-26-nvidia-h200, tiny_batch), a host bottleneck no input explains.

Where the host spends >= 20 % of the phase blocked in copies from pageable memory, that is the
cause and PAGEABLE_COPY names it (rules/pageable.py), not HOST_BOUND.

SYNC_BOUND is the same symptom with a known cause: the hooks saw device-to-host synchronisations
(`.item()`, `.cpu()`, `.numpy()` of device values; hooks/sync_counting.py) on every step, which
drain the GPU's queue so host and device take turns instead of overlapping. Because the cause is
seen, it is named whenever the GPU is below the healthy 80 % busy (whatif.HEALTHY_BUSY), not only
below 50 %: on the H200 two syncs a step kept a GPU 65–81 % busy and removing them gave
1.08–1.28× (item_sync). It needs the hooks' "sync" events (data: phase, count, steps that
synced); without them the symptom is reported as HOST_BOUND, whose fix lists sync points among
the causes.
"""

from __future__ import annotations

from gpuwhy.analysis import whatif
from gpuwhy.analysis.context import RunContext
from gpuwhy.analysis.framework import pick
from gpuwhy.analysis.rules.common import phase_util, r
from gpuwhy.analysis.rules.input_bound import HIGH_FRACTION, MODERATE_FRACTION, contended_s
from gpuwhy.analysis.rules.pageable import copy_fraction
from gpuwhy.analysis.rules.placement import no_kernel_ran
from gpuwhy.model import Finding, Severity

LOW_UTIL_PCT = 50.0  # Nsight Systems gpu_time_util; torch-tb-profiler "increase batch size"
SYNCS_PER_STEP = 1.0  # a synchronisation on every step serialises host and device
# "Every step", read as most of them: a queue drained on at least every other step can never
# run more than a step ahead. Only where the events say how many steps synced; many syncs
# crowded into a few steps (an evaluation inside the phase) are not this pattern.
SYNCED_STEP_FRACTION = 0.5
REFERENCE = "Nsight Systems 'GPU Low Utilization' (< 50 %), XProf input band (< 5 % waiting)"
SYNC_REFERENCE = "a sync on most steps while the GPU is below gpu-idle's healthy 80 % busy"

HOST_FIXES = {
    "tensorflow": (
        "Give the GPU more work per host step: a larger batch size; "
        "`model.compile(..., steps_per_execution=32, jit_compile=True)` (Keras) or "
        "`@tf.function(jit_compile=True)` around the step; keep Python work and per-batch "
        "callbacks/`.numpy()` out of the loop; `TF_GPU_THREAD_MODE=gpu_private` if tf.data "
        "competes for the CPU."
    ),
    "keras-jax": (
        "Give the GPU more work per host step: a larger batch size and "
        "`model.compile(..., steps_per_execution=32)`; keep per-batch callbacks async-safe."
    ),
    "torch": (
        "Give the GPU more work per host step: a larger batch size; `model = torch.compile(model)`"
        " or CUDA graphs (`torch.compile(mode='reduce-overhead')`) to cut launch overhead; remove "
        "per-step `.item()`/`.cpu()`/`print(tensor)` (log every N steps instead)."
    ),
    "default": (
        "Give the GPU more work per host step: a larger batch size, compiled/fused steps (XLA, "
        "torch.compile), and no per-step Python work or device-to-host copies."
    ),
}

UNTIMED_INPUT = (
    "The loop's input was not timed (no DataLoader or tf.data iterator ran): if each step reads "
    "or builds its batch, that may be the wait instead; time it (`for batch in "
    "gpuwhy.iterate(batches):`), or move it into DataLoader workers or a tf.data pipeline."
)

SYNC_FIXES = {
    "torch": (
        "Stop synchronising every step: accumulate the loss on the device "
        "(`total += loss.detach()`) and call `.item()` every N steps; avoid `.cpu()`, "
        "`.tolist()`, `print(tensor)` and tensor-valued `if` in the step; "
        "`torch.cuda.set_sync_debug_mode('warn')` lists the remaining sync points."
    ),
    "keras-torch": (
        "Stop synchronising every step: Keras fetches the logs of every batch on the training "
        "thread when a callback overrides `on_train_batch_end` (or another batch-end hook) "
        "without `async_safe = True`; set it on such callbacks, or log every N batches; avoid "
        "`.item()`/`.cpu()` in custom `train_step` code."
    ),
    "tensorflow": (
        "Stop synchronising every step: no `.numpy()`, `float(loss)` or `tf.print` per step in a "
        "custom loop (read metrics every N steps); in Keras, `steps_per_execution=32`."
    ),
    "jax": (
        "Stop synchronising every step: keep the loss on the device (`losses.append(loss)`) and "
        "read it every N steps (`jax.device_get(losses)`); no `float(loss)`, `print(loss)` or "
        "`block_until_ready()` in the step; JAX dispatches asynchronously only while the host "
        "does not read."
    ),
    "default": (
        "Stop synchronising every step: read losses and metrics from the device every N steps, "
        "not on each one."
    ),
}


def check(ctx: RunContext) -> list[Finding]:
    train = ctx.training_phase()
    if train is None or train.steps == 0:
        return []
    util = phase_util(ctx, train)
    wait = train.data_wait_fraction
    if util is None or util >= whatif.HEALTHY_BUSY * 100:
        return []
    if no_kernel_ran(ctx.active_gpu().values()):
        return []  # the work is not on the GPU at all: NOT_ON_GPU's case
    if wait is not None and wait >= MODERATE_FRACTION:
        return []  # the GPU waits for data: INPUT_BOUND's case
    if contended_s(ctx, train, ctx.inputs.get(train.name)):
        return []  # the input's workers take the launching thread's cores: INPUT_BOUND's case
    if copy_fraction(ctx, train.name) >= HIGH_FRACTION:
        return []  # the host blocks in pageable copies: PAGEABLE_COPY's case
    # Every rank counts its own syncs: divide by every rank's steps, not one rank's.
    syncs, steps = ctx.sync_counts.get(train.name, 0), train.process_steps
    per_step = syncs / steps
    synced = ctx.synced_steps.get(train.name)
    synced_fraction = None if synced is None else min(1.0, synced / steps)
    sync_bound = per_step >= SYNCS_PER_STEP and (
        synced_fraction is None or synced_fraction >= SYNCED_STEP_FRACTION
    )
    if not sync_bound and util >= LOW_UTIL_PCT:
        return []
    est = whatif.feed_gpu(ctx.duration_s, train.name, train.time_s, util)
    evidence = {
        "phase": train.name,
        "gpu_util_pct": r(util, 1),
        "data_wait_fraction": r(wait),
        "steps": train.steps,
        "step_time_p50_s": r(train.step_time_p50_s, 4),
        "step_gap_s": r(train.step_gap_s),
        "job_cpu_pct": r(_job_cpu(ctx, train.name), 1),
        "threshold_util_pct": whatif.HEALTHY_BUSY * 100 if sync_bound else LOW_UTIL_PCT,
        "reference": SYNC_REFERENCE if sync_bound else REFERENCE,
    }
    if sync_bound:
        evidence["syncs_per_step"] = r(per_step, 2)
        if synced_fraction is not None:
            evidence["synced_step_fraction"] = r(synced_fraction)
        return [
            Finding(
                code="SYNC_BOUND",
                severity=Severity.WARNING,
                title=(
                    f"{per_step:.1f} device-to-host syncs per step keep the GPU "
                    f"{100 - util:.0f} % idle in '{train.name}'"
                ),
                evidence=evidence,
                fix=pick(ctx.framework, SYNC_FIXES),
                speedup=est.speedup,
                speedup_method=est.method,
            )
        ]
    fix = pick(ctx.framework, HOST_FIXES)
    if wait is None:
        evidence["data_wait_measured"] = False
        fix += " " + UNTIMED_INPUT
    return [
        Finding(
            code="HOST_BOUND",
            severity=Severity.WARNING,
            title=(
                f"GPU busy only {util:.0f} % of '{train.name}'"
                + (" although data is ready" if wait is not None else "")
                + ": the host cannot feed it (launch/Python overhead, small batches)"
                + ("; the input wait was not measured" if wait is None else "")
            ),
            evidence=evidence,
            fix=fix,
            speedup=est.speedup,
            speedup_method=est.method,
        )
    ]


def _job_cpu(ctx: RunContext, phase: str) -> float | None:
    host = ctx.host.get(phase)
    return host.job_cpu_mean_pct if host else None
