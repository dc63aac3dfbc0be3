"""NOT_ON_GPU seen in a trace: the profiler saw a GPU, the steps ran, and (almost) no work ran
on it: the model's operators ran on the CPU.

A Kineto trace lists the machine's GPUs (`deviceProperties`) whether or not the job used them; an
XPlane profile has a plane per GPU. "Almost no work" is the union of the device's kernels,
copies and sets under 0.5 % of the steps' time: the trace's exact form of the recording's rule
(NVML utilization under 0.5 %: most samples saw no kernel, rules/placement.py), so a stray
`.cuda()` of a loss value does not hide a model left on the CPU.

Seen partly (`cpu_ops_beside_gpu`): the GPU ran the model, but top-level host operators that
launched no device work held the step while the GPU idled under them (host_ops.py): a tensor or
a module left on the CPU. Judged, like the data loader's wait, by the exposed time's share of
the steps, in XProf's input bands (references.md#xprof-input-pipeline): time the step waits on
host work the GPU could do. The speed-up is an upper bound: moved to the GPU, the operator still
takes some device time.
"""

from __future__ import annotations

import statistics

from gpuwhy.analysis.kernels.findings import who
from gpuwhy.analysis.kernels.host_ops import cpu_ops
from gpuwhy.analysis.kernels.steps import RankFacts
from gpuwhy.analysis.rules.input_bound import HIGH_FRACTION, MODERATE_FRACTION
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
            "seen": "whole",  # no work on the GPU (cpu_ops_beside_gpu: some operators)
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


PARTIAL_FIX = (
    "Run these operators on the GPU: create or move their tensors there "
    "(`x = x.to(device, non_blocking=True)`, `torch.zeros(n, device=device)` rather than "
    "`torch.zeros(n)`) and the module that owns them (`model.to(device)`; a submodule built "
    "after it, or a tensor kept as a plain attribute rather than a buffer "
    "(`self.register_buffer(...)`), stays on the CPU). TensorFlow: build them under "
    "`with tf.device('/GPU:0'):`."
)
PARTIAL_REFERENCE = (
    "XProf input bands (>= 5 % moderate, >= 20 % high), applied to the host time the GPU "
    "idles under operators that launch no device work"
)


def cpu_ops_beside_gpu(facts: RankFacts, phase: str) -> Finding | None:
    """The GPU ran work, but host operators that launched none held the steps while it idled."""
    steps = facts.steps
    found = cpu_ops(facts)
    time_ns = sum(step.time_ns for step in steps)
    if found is None or time_ns <= 0:
        return None
    exposed_ns = sum(found.exposed_ns)
    fraction = exposed_ns / time_ns
    if fraction < MODERATE_FRACTION:
        return None
    high = fraction >= HIGH_FRACTION
    count = len(steps)
    heaviest = sorted(found.op_exposed_ns.items(), key=lambda item: (-item[1], item[0]))
    step_ms = statistics.median(step.time_ns for step in steps) / 1e6
    names = [name for name, ns in heaviest[:TOP_OPERATORS] if ns > 0]
    return Finding(
        code="NOT_ON_GPU",
        severity=Severity.WARNING if high else Severity.INFO,
        title=(
            f"{who(facts)}operators that launch no GPU work ({', '.join(names[:2])}) run on the "
            f"CPU while the GPU idles, {fraction:.0%} of the steps' time"
        ),
        evidence={
            "phase": phase,
            "rank": facts.trace.rank,
            "seen": "partly",  # the GPU ran the rest of the steps' work
            "exposed_fraction": round(fraction, 3),
            "exposed_ms_per_step": round(exposed_ns / count / 1e6, 2),
            "step_time_ms": round(step_ms, 2),
            "gpu_busy": round(1 - sum(step.idle_ns for step in steps) / time_ns, 4),
            "steps": count,
            # per operator: the GPU's idle time under it, its host time, calls (per step)
            "cpu_ops": {
                name: {
                    "exposed_ms_per_step": round(found.op_exposed_ns[name] / count / 1e6, 2),
                    "share_of_step": round(found.op_exposed_ns[name] / time_ns, 3),
                    "host_ms_per_step": round(found.op_ns[name] / count / 1e6, 2),
                    "calls_per_step": round(found.op_calls[name] / count, 1),
                }
                for name in names
            },
            "band": "high" if high else "moderate",
            "threshold_fraction": HIGH_FRACTION if high else MODERATE_FRACTION,
            "reference": PARTIAL_REFERENCE,
        },
        fix=PARTIAL_FIX,
        speedup=round(time_ns / (time_ns - exposed_ns), 3) if exposed_ns < time_ns else None,
        speedup_method=(
            "at most: the GPU's idle time under these operators removed from each step; moved "
            "to the GPU they still take some device time (summed steps before over after)"
        ),
    )
