"""The runtime rules: one module per family, each a pure function ``(RunContext) -> [Finding]``.

Every threshold sits beside its rule with the reference it comes from; docs/findings.md lists
them all. Rules that read GPU samples return nothing for a recording without them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpuwhy.analysis.context import RunContext
from gpuwhy.analysis.rules import (
    gpu_bound,
    host,
    input_bound,
    memory,
    multi_gpu,
    one_time,
    pageable,
    phase_gap,
    placement,
    straggler,
    throttle,
    transfer,
    validation,
)
from gpuwhy.model import Finding

Rule = Callable[[RunContext], list[Finding]]

RULES: Sequence[Rule] = (
    placement.check,  # NOT_ON_GPU
    input_bound.check,  # INPUT_BOUND
    one_time.check,  # ONE_TIME_WORK
    validation.check,  # SLOW_VALIDATION
    phase_gap.check,  # PHASE_GPU_GAP
    host.check,  # HOST_BOUND, SYNC_BOUND
    multi_gpu.check,  # IDLE_GPUS, IDLE_ALLOCATED, GPU_IMBALANCE
    straggler.check,  # STRAGGLER
    pageable.check,  # PAGEABLE_COPY
    transfer.check,  # TRANSFER_BOUND
    throttle.check,  # THROTTLED
    memory.check,  # MEMORY_PRESSURE
    gpu_bound.check,  # GPU_BOUND
)

RUNTIME_CODES = (
    "NOT_ON_GPU",
    "INPUT_BOUND",
    "ONE_TIME_WORK",
    "SLOW_VALIDATION",
    "PHASE_GPU_GAP",
    "HOST_BOUND",
    "LAUNCH_BOUND",  # from profiler traces (analysis/kernels)
    "SYNC_BOUND",
    "IDLE_GPUS",
    "IDLE_ALLOCATED",
    "GPU_IMBALANCE",
    "STRAGGLER",
    "EXPOSED_COMMS",  # from profiler traces (analysis/kernels)
    "TRANSFER_BOUND",
    "PAGEABLE_COPY",  # from the hooks' timed copies, and from profiler traces
    "THROTTLED",
    "MEMORY_PRESSURE",
    "GPU_BOUND",
)


def run_rules(ctx: RunContext, rules: Sequence[Rule] = RULES) -> list[Finding]:
    """Every rule's findings, unsorted."""
    findings: list[Finding] = []
    for rule in rules:
        findings.extend(rule(ctx))
    return findings
