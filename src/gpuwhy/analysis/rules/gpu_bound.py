"""GPU_BOUND: healthy — the GPU is the bottleneck; what remains is making its work cheaper.

Threshold: the job's GPUs busy >= 80 % of training (gpu-idle reports no finding at busy >= 80 %;
NVIDIA DCGM calls SM activity >= 0.8 "necessary", references.md#dcgm-sm-activity) with data wait
below XProf's 5 % band. Busy time is not SM usage (references.md#busy-is-not-sm-activity): where SM
activity was recorded and stays below 0.5 ("likely ineffective", DCGM), the hint is a bigger batch;
where tensor cores sat idle, mixed precision.
"""

from __future__ import annotations

from gpuwhy.analysis import whatif
from gpuwhy.analysis.context import RunContext
from gpuwhy.analysis.framework import pick
from gpuwhy.analysis.rules.common import phase_util, r, used_stats
from gpuwhy.analysis.rules.input_bound import MODERATE_FRACTION
from gpuwhy.model import Finding, Severity

BUSY_PCT = whatif.HEALTHY_BUSY * 100
SM_ACTIVE_LOW = 0.5  # DCGM: "less than 0.5 likely indicates ineffective GPU usage"
REFERENCE = (
    "gpu-idle: busy >= 80 % is healthy; DCGM SM activity >= 0.8 necessary, < 0.5 ineffective"
)

HINTS = {
    "tensorflow": (
        "Make each step cheaper: `keras.mixed_precision.set_global_policy('mixed_float16')` "
        "(tensor cores), `model.compile(..., jit_compile=True)` (XLA fusion)."
    ),
    "keras-jax": (
        "Make each step cheaper: `keras.mixed_precision.set_global_policy('mixed_bfloat16')` "
        "(tensor cores); JAX already compiles the step with XLA."
    ),
    "torch": (
        "Make each step cheaper: `torch.autocast('cuda', dtype=torch.bfloat16)` (tensor cores), "
        "`model = torch.compile(model)` (kernel fusion), `torch.backends.cuda.matmul."
        "allow_tf32 = True` on Ampere and newer."
    ),
    "default": "Make each step cheaper: mixed precision (tensor cores) and compiled, fused steps.",
}


def check(ctx: RunContext) -> list[Finding]:
    train = ctx.training_phase()
    if train is None or train.steps == 0:
        return []
    util = phase_util(ctx, train)
    wait = train.data_wait_fraction or 0.0
    if util is None or util < BUSY_PCT or wait >= MODERATE_FRACTION:
        return []
    stats = used_stats(ctx, train.name)
    sm = [s.sm_active_mean for s in stats.values() if s.sm_active_mean is not None]
    tensor = [s.tensor_active_mean for s in stats.values() if s.tensor_active_mean is not None]
    sm_active = sum(sm) / len(sm) if sm else None
    tensor_active = sum(tensor) / len(tensor) if tensor else None
    fix = pick(ctx.framework, HINTS)
    if sm_active is not None and sm_active < SM_ACTIVE_LOW:
        fix = (
            f"Busy but only {sm_active:.0%} of SM cycles have work: a larger batch size (or "
            "fused kernels) fills the GPU. " + fix
        )
    return [
        Finding(
            code="GPU_BOUND",
            severity=Severity.INFO,
            title=f"The GPU is the bottleneck: busy {util:.0f} % of '{train.name}' (healthy)",
            evidence={
                "phase": train.name,
                "gpu_util_pct": r(util, 1),
                "sm_active": r(sm_active),
                "tensor_active": r(tensor_active),
                "data_wait_fraction": r(wait),
                "threshold_util_pct": BUSY_PCT,
                "reference": REFERENCE,
            },
            fix=fix,
            speedup=None,
            speedup_method="not estimated: depends on the model's precision and kernels",
        )
    ]
