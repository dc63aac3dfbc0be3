"""NOT_ON_GPU seen in a trace: the profiler saw a GPU, the steps ran, and (almost) no work ran
on it: the model's operators ran on the CPU.

A Kineto trace lists the machine's GPUs (`deviceProperties`) whether or not the job used them; an
XPlane profile has a plane per GPU. "Almost no work" is the union of the device's kernels,
copies and sets under 0.5 % of the steps' time: the trace's exact form of the recording's rule
(NVML utilization under 0.5 %: most samples saw no kernel, rules/placement.py), so a stray
`.cuda()` of a loss value does not hide a model left on the CPU.
"""

from __future__ import annotations

from gpuwhy.analysis.kernels.findings import who
from gpuwhy.analysis.kernels.steps import RankFacts
from gpuwhy.analysis.rules.placement import FIXES, NO_KERNEL_UTIL_PCT
from gpuwhy.model import Finding, Severity

NO_DEVICE_WORK_FRACTION = NO_KERNEL_UTIL_PCT / 100
TOP_OPERATORS = 5

REFERENCE = (
    "the device's kernels, copies and sets: their union over the steps' time "
    "(NVML utilization's definition: time one or more kernels ran)"
)


def not_on_gpu(facts: RankFacts, phase: str) -> Finding | None:
    """The steps ran with a GPU present and (almost) idle."""
    trace, steps = facts.trace, facts.steps
    if not steps or not trace.devices:
        return None
    time_ns = sum(step.time_ns for step in steps)
    busy_ns = sum(step.time_ns - step.idle_ns for step in steps)
    if time_ns <= 0 or busy_ns / time_ns >= NO_DEVICE_WORK_FRACTION:
        return None
    heaviest = sorted(trace.cpu_op_ns.items(), key=lambda item: (-item[1], item[0]))
    return Finding(
        code="NOT_ON_GPU",
        severity=Severity.ERROR,
        title=(
            f"{who(facts)}{len(steps)} profiled steps ran with {_gpus(trace.devices)} present and "
            f"{'no' if busy_ns == 0 else 'almost no'} work on it: the job's operators ran on "
            "the CPU"
        ),
        evidence={
            "phase": phase,
            "rank": trace.rank,
            "steps": len(steps),
            "gpus": {str(device): name for device, name in sorted(trace.devices.items())},
            "gpu_busy": round(busy_ns / time_ns, 4),
            "kernels_per_step": round(sum(step.kernels for step in steps) / len(steps), 1),
            "step_time_ms": round(time_ns / len(steps) / 1e6, 2),
            # Inclusive: an operator's time holds the operators it called.
            "cpu_ops_ms": {name: round(ns / 1e6, 2) for name, ns in heaviest[:TOP_OPERATORS]},
            "threshold_gpu_busy": NO_DEVICE_WORK_FRACTION,
            "reference": REFERENCE,
        },
        fix=FIXES["torch"] if trace.format == "kineto" else FIXES["default"],
        speedup=None,
        speedup_method="not estimated: the GPU's speed-up over the CPU depends on the model",
    )


def _gpus(devices: dict[int, str]) -> str:
    names = sorted(set(devices.values()))
    if len(devices) == 1:
        return f"a GPU ({names[0]})"
    return f"{len(devices)} GPUs ({', '.join(names)})"
