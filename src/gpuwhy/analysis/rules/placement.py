"""NOT_ON_GPU: a usable GPU is there, steps ran, and no kernel ran on it.

"Usable" comes from the environment: NVML enumerated the GPUs for the recording and the doctor's
rules found no error (no missing driver, CPU-only build, hidden devices...) for the job's
interpreter — where they did, that environment finding is the answer and this rule stays quiet.
"Never on it": NVML's utilization is a whole percentage per sample of the time a kernel ran, so a
mean below 0.5 % over the steps means most samples saw no kernel at all; and where GPM measured SM
activity (Hopper and later, in per-mille), a mean below 1 ‰ says the same (references.md#nvml-
utilization). A job that does place its work on the GPU but mostly waits for data reads about 1 %
with SMs active at 4–5 ‰ (the DataLoader scenario on an H200, tests/data/gpu): kernels ran, and
INPUT_BOUND is the answer there. The job's presence in NVML's process list is reported as
evidence only, because NVML's PIDs are the host's and miss a job in a container
(references.md#nvml-processes).
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuwhy.analysis.alignment import GpuWindowStats
from gpuwhy.analysis.context import RunContext
from gpuwhy.analysis.framework import concerns_job, pick
from gpuwhy.analysis.rules.common import MIN_PHASE_S, r
from gpuwhy.model import Finding, Severity

REFERENCE = "NVML utilization.gpu: % of time one or more kernels was executing (0 = none ran)"

NO_KERNEL_UTIL_PCT = 0.5  # mean of whole-percent samples: below it, most samples read 0
NO_KERNEL_SM_ACTIVE = 0.001  # GPM SM activity's resolution (1 per mille)

FIXES = {
    "tensorflow": (
        "TensorFlow ran on the CPU: `tf.config.list_physical_devices('GPU')` in the job's "
        "interpreter must list the GPU (`gpuwhy doctor --python PATH` says why not); remove any "
        "`CUDA_VISIBLE_DEVICES=''` or `with tf.device('/CPU:0')` around the model."
    ),
    "keras-torch": (
        "Keras on torch uses the GPU only if `torch.cuda.is_available()` is True in the job: "
        "install a CUDA build of torch (`torch.version.cuda` must not be None)."
    ),
    "keras-jax": (
        "Keras on JAX uses the GPU only if `jax.devices()` lists it: "
        '`pip install -U "jax[cuda12]"`.'
    ),
    "torch": (
        "Move the model and every batch to the GPU: `device = torch.device('cuda')`, "
        "`model.to(device)`, and in the loop `x = x.to(device, non_blocking=True)` "
        "(check `torch.cuda.is_available()` first)."
    ),
    "jax": '`jax.devices()` lists only the CPU: `pip install -U "jax[cuda12]"` (or cuda13).',
    "default": (
        "Place the model and the batches on the GPU, and check that the framework sees it "
        "(`gpuwhy doctor`)."
    ),
}


def no_kernel_ran(stats: Iterable[GpuWindowStats]) -> bool:
    """Whether the readings say no kernel ran on any of these GPUs (module docstring)."""
    return all(
        s.util_mean_pct is not None
        and s.util_mean_pct < NO_KERNEL_UTIL_PCT
        and (s.sm_active_mean or 0) < NO_KERNEL_SM_ACTIVE  # SMs active: kernels ran, if rarely
        for s in stats
    )


def check(ctx: RunContext) -> list[Finding]:
    if not ctx.devices or not ctx.has_gpu_samples:
        return []
    if any(
        f.severity is Severity.ERROR and concerns_job(ctx.framework, f)
        for f in ctx.environment_findings
    ):
        return []  # the GPU is not usable by this job: the environment finding says why
    stepped = [p for p in ctx.named_phases if p.steps > 0 and p.time_s >= MIN_PHASE_S]
    if not stepped:
        return []
    active = ctx.active_gpu()
    utils = [s.util_mean_pct for s in active.values()]
    if not active:
        return []
    if any(u is None for u in utils):
        # No utilization (MIG): rely on the process list alone.
        if any(s.job_seen is not False for s in active.values()):
            return []
    elif not no_kernel_ran(active.values()):
        return []
    steps = sum(p.steps for p in stepped)
    evidence = {
        "steps": steps,
        "phases": [p.name for p in stepped],
        "gpus": len(ctx.devices),
        "gpu_util_pct": {str(d): r(s.util_mean_pct, 1) for d, s in active.items()},
        "job_on_gpu": {str(d): s.job_seen for d, s in active.items()},
        "sm_active": {str(d): r(s.sm_active_mean, 4) for d, s in active.items()},
        "threshold_util_pct": NO_KERNEL_UTIL_PCT,
        "reference": REFERENCE,
    }
    return [
        Finding(
            code="NOT_ON_GPU",
            severity=Severity.ERROR,
            title=(
                f"{steps} steps ran but no kernel ran on the GPU: the job's work runs on the CPU"
            ),
            evidence=evidence,
            fix=pick(ctx.framework, FIXES),
            speedup=None,
            speedup_method="not estimated: the GPU's speed-up over the CPU depends on the model",
        )
    ]
