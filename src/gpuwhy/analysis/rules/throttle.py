"""THROTTLED: the driver held the clocks down for power or heat while the job ran.

Read from NVML's clock-event reasons bitmask (references.md#nvml-clock-events), excluding GpuIdle
(0x1: clocks drop because nothing runs — not a problem) and the informational bits (application
clocks, sync boost, display clock). Reported when a throttling reason is set in at least 20 % of the
job's samples (the share XProf treats as "highly" significant, references.md#xprof-input-pipeline)
and the SM clock averaged at least 15 % below the GPU's maximum (gpuprof's thermal rule: clock drop
> 15 %, references.md#gpuprof-traceml). Thermal and hardware slowdowns are warnings; a software
power cap alone is info — a saturated GPU at its power limit is normal.
"""

from __future__ import annotations

from gpuwhy.analysis import whatif
from gpuwhy.analysis.context import RunContext
from gpuwhy.analysis.rules.common import MIN_PHASE_S, r, used_stats
from gpuwhy.model import Finding, Severity

SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SW_THERMAL = 0x20
HW_THERMAL = 0x40
HW_POWER_BRAKE = 0x80
REASON_NAMES = {
    SW_POWER_CAP: "SwPowerCap",
    HW_SLOWDOWN: "HwSlowdown",
    SW_THERMAL: "SwThermalSlowdown",
    HW_THERMAL: "HwThermalSlowdown",
    HW_POWER_BRAKE: "HwPowerBrakeSlowdown",
}
SERIOUS = HW_SLOWDOWN | SW_THERMAL | HW_THERMAL | HW_POWER_BRAKE
SAMPLE_FRACTION = 0.20
CLOCK_DROP_FRACTION = 0.15  # gpuprof thermal rule
REFERENCE = "NVML clock-event reasons (GpuIdle excluded); gpuprof: clock drop > 15 %"

FIX_THERMAL = (
    "Cool the GPU: check fans, airflow and ambient temperature (`nvidia-smi -q -d "
    "TEMPERATURE,PERFORMANCE` names the active reason); in a server, ask the administrator about "
    "the chassis cooling and the power brake signal."
)
FIX_POWER = (
    "The GPU runs at its power limit (`nvidia-smi -q -d POWER`): an administrator can raise it "
    "with `nvidia-smi -pl WATTS` up to the board's maximum; otherwise mixed precision does the "
    "same work for less energy."
)


def check(ctx: RunContext) -> list[Finding]:
    train = ctx.training_phase()
    window = train.name if train is not None and train.time_s >= MIN_PHASE_S else "_active"
    phase_s = train.time_s if window != "_active" and train is not None else ctx.duration_s
    findings = []
    for index, stats in used_stats(ctx, window).items():
        if not stats.reason_samples:
            continue
        shares = {
            bit: stats.reason_counts.get(bit, 0) / stats.reason_samples for bit in REASON_NAMES
        }
        active = {bit: share for bit, share in shares.items() if share >= SAMPLE_FRACTION}
        if not active:
            continue
        info = next((d for d in ctx.devices if d.index == index), None)
        max_mhz = info.sm_clock_max_mhz if info else None
        clock = stats.sm_clock_mean_mhz
        drop = 1 - clock / max_mhz if clock and max_mhz else None
        if drop is not None and drop < CLOCK_DROP_FRACTION:
            continue
        serious = any(bit & SERIOUS for bit in active)
        if drop is not None and clock is not None and max_mhz:
            est = whatif.full_clocks(
                ctx.duration_s, window, phase_s, stats.util_mean_pct or 0.0, clock, max_mhz
            )
            speedup, method = est.speedup, est.method
        else:
            speedup, method = None, "not estimated: the SM clock or its maximum was not recorded"
        names = ", ".join(REASON_NAMES[bit] for bit in sorted(active))
        findings.append(
            Finding(
                code="THROTTLED",
                severity=Severity.WARNING if serious else Severity.INFO,
                title=f"GPU {index} clocks held down ({names})"
                + (f": SM clock {drop:.0%} below its maximum" if drop is not None else ""),
                evidence={
                    "gpu": index,
                    "phase": window,
                    "reasons": {REASON_NAMES[bit]: r(share) for bit, share in active.items()},
                    "sm_clock_mean_mhz": r(clock, 0),
                    "sm_clock_max_mhz": max_mhz,
                    "clock_drop_fraction": r(drop),
                    "threshold_sample_fraction": SAMPLE_FRACTION,
                    "threshold_clock_drop_fraction": CLOCK_DROP_FRACTION,
                    "reference": REFERENCE,
                },
                fix=FIX_THERMAL if serious else FIX_POWER,
                speedup=speedup,
                speedup_method=method,
            )
        )
    return findings
