"""PHASE_GPU_GAP: one phase keeps the GPU busy, another leaves it idle ("why does it use the GPU
for validation but not for training?", and the reverse).

Threshold: Nsight Systems' "GPU Low Utilization" rule flags time utilization below 50 %
(gpu_time_util DEFAULT_THRESHOLD, references.md#nsight-rules). A gap is one phase at or above 50 %
while another is below it and at most half as busy, each long enough to hold several samples.
"""

from __future__ import annotations

from gpuwhy.analysis import whatif
from gpuwhy.analysis.context import IDLE_UTIL_PCT, RunContext
from gpuwhy.analysis.rules.common import phase_util, r
from gpuwhy.analysis.rules.input_bound import HIGH_FRACTION, MODERATE_FRACTION
from gpuwhy.model import Finding, Severity

LOW_UTIL_PCT = 50.0  # Nsight Systems gpu_time_util threshold
REFERENCE = "Nsight Systems 'GPU Low Utilization' rule: < 50 % time utilization"


def _reason(name: str, util: float, wait: float | None) -> tuple[str, str]:
    if wait is not None and wait >= HIGH_FRACTION:
        return (
            f"'{name}' waits for input {wait:.0%} of its time",
            f"Speed up the input of '{name}' (see INPUT_BOUND): parallel workers, prefetch, cache.",
        )
    if util < IDLE_UTIL_PCT:
        return (
            f"no kernel ran during '{name}': its work runs on the CPU",
            f"Run '{name}' on the GPU too: the model and every batch of '{name}' on the device "
            "(no CPU copy of the model, no NumPy/Python metric computed per batch).",
        )
    return (
        f"the host, not the GPU, sets the pace of '{name}' (Python work, callbacks, small batches)",
        f"Give '{name}' more GPU work per host step: a larger batch size, compiled steps "
        "(`jit_compile=True` / `torch.compile`), and per-batch Python work moved out of it.",
    )


def _explained_by(ctx: RunContext, name: str, util: float, wait: float | None) -> str | None:
    """The finding that already names this phase's cause (and carries its speed-up), if any."""
    if wait is not None and wait >= MODERATE_FRACTION:
        return "INPUT_BOUND"
    train = ctx.training_phase()
    if train is not None and train.name == name and util >= IDLE_UTIL_PCT:
        return "HOST_BOUND"
    return None


def check(ctx: RunContext) -> list[Finding]:
    loads = []
    for phase in ctx.named_phases:
        util = phase_util(ctx, phase)
        if util is not None:
            loads.append((phase, util))
    if len(loads) < 2:
        return []
    busy, busy_util = max(loads, key=lambda item: item[1])
    if busy_util < LOW_UTIL_PCT:
        return []
    findings = []
    for phase, util in loads:
        if phase is busy or util >= LOW_UTIL_PCT or util > busy_util / 2:
            continue
        reason, fix = _reason(phase.name, util, phase.data_wait_fraction)
        explained = _explained_by(ctx, phase.name, util, phase.data_wait_fraction)
        if explained is None:
            est = whatif.match_busier_phase(
                ctx.duration_s, phase.name, phase.time_s, util, busy_util, busy.name
            )
            speedup, method = est.speedup, est.method
        else:
            # The cause has its own finding with the speed-up of its fix; counting it here
            # again would rank the symptom above the cause.
            speedup, method = None, f"see {explained}: the cause of this gap, with its estimate"
        findings.append(
            Finding(
                code="PHASE_GPU_GAP",
                severity=Severity.WARNING if explained is None else Severity.INFO,
                title=(
                    f"GPU busy in '{busy.name}' ({busy_util:.0f} %), idle in '{phase.name}' "
                    f"({util:.0f} %): {reason}"
                ),
                evidence={
                    "busy_phase": busy.name,
                    "busy_phase_gpu_util_pct": r(busy_util, 1),
                    "idle_phase": phase.name,
                    "idle_phase_gpu_util_pct": r(util, 1),
                    "idle_phase_time_s": r(phase.time_s),
                    "idle_phase_data_wait_fraction": r(phase.data_wait_fraction),
                    "reason": reason,
                    "explained_by": explained,
                    "threshold_util_pct": LOW_UTIL_PCT,
                    "reference": REFERENCE,
                },
                fix=fix,
                speedup=speedup,
                speedup_method=method,
            )
        )
    return findings
