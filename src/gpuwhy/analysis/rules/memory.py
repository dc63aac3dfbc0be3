"""MEMORY_PRESSURE: the job's GPU memory peaked near the device's capacity.

Threshold: peak memory above 90 % of the device (torch-tb-profiler's memory rule and gpuprof's
memory_pressure, references.md#torch-tb-profiler, 10). TensorFlow maps nearly all GPU memory at
start-up unless memory growth is on (references.md#tf-devices-memory), so NVML's "used"
memory says nothing about a TensorFlow job's needs: the rule stays quiet for TensorFlow rather than
raise a false alarm. No speed-up: memory near the limit risks out-of-memory errors and allocator
churn, not a measurable slowdown.
"""

from __future__ import annotations

from gpuwhy.analysis.context import RunContext
from gpuwhy.analysis.framework import pick
from gpuwhy.analysis.rules.common import r, used_stats
from gpuwhy.model import Finding, Severity

PEAK_FRACTION = 0.90
REFERENCE = "torch-tb-profiler and gpuprof: peak memory > 90 % of the device"

FIXES = {
    "torch": (
        "Make room: mixed precision (`torch.autocast('cuda', dtype=torch.bfloat16)`), activation "
        "checkpointing (`torch.utils.checkpoint`), or a smaller batch with gradient accumulation; "
        "`torch.cuda.max_memory_allocated()` vs `max_memory_reserved()` separates tensors from "
        "the allocator's cache."
    ),
    "keras-jax": (
        "Make room: mixed precision (`keras.mixed_precision.set_global_policy('mixed_bfloat16')`) "
        "or a smaller batch; JAX preallocates 75 % of the GPU unless "
        "`XLA_PYTHON_CLIENT_PREALLOCATE=false`."
    ),
    "default": (
        "Make room: mixed precision, activation checkpointing, or a smaller batch with gradient "
        "accumulation."
    ),
}


def check(ctx: RunContext) -> list[Finding]:
    if ctx.framework.is_tensorflow:
        return []
    findings = []
    for index, stats in used_stats(ctx, "_run").items():
        info = next((d for d in ctx.devices if d.index == index), None)
        total = info.memory_total_bytes if info else None
        peak = stats.memory_used_max_bytes
        if not total or peak is None or peak / total < PEAK_FRACTION:
            continue
        findings.append(
            Finding(
                code="MEMORY_PRESSURE",
                severity=Severity.INFO,
                title=f"GPU {index} memory peaked at {peak / total:.0%} of {total / 2**30:.0f} GiB",
                evidence={
                    "gpu": index,
                    "memory_used_max_bytes": peak,
                    "job_memory_max_bytes": stats.job_memory_max_bytes,
                    "memory_total_bytes": total,
                    "peak_fraction": r(peak / total),
                    "threshold_fraction": PEAK_FRACTION,
                    "reference": REFERENCE,
                },
                fix=pick(ctx.framework, FIXES),
                speedup=None,
                speedup_method="not estimated: a risk of out-of-memory errors, not a slowdown",
            )
        )
    return findings
