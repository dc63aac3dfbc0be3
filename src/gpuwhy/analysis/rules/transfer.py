"""TRANSFER_BOUND: host<->device copies take a large part of the time, judged against the PCIe
link's own limit (no peer normalises to the link, references.md#peer-gaps).

The link's bandwidth per direction is its maximum generation's per-lane rate after line encoding
times its maximum width (PCI-SIG base specifications: 2.5/5 GT/s with 8b/10b for gen 1/2,
8/16/32 GT/s with 128b/130b for gen 3/4/5, 64 GT/s PAM4 with 242-of-256-byte FLITs for gen 6).
NVML's PCIe throughput counter is a 20 ms snapshot in KB/s (references.md#nvml-pcie); its mean over
the phase divided by the link bandwidth is the share of the phase the link was moving data. At
>= 20 % of step time spent copying, TraceML's H2D_BOUND turns critical
(references.md#gpuprof-traceml) and XProf counts host-to-device time as input time (its 20 % "highly
input-bound" band, references.md#xprof-input-pipeline). Only reported while the GPU is below the
healthy 80 % busy level: a busy GPU overlaps its copies.
"""

from __future__ import annotations

from gpuwhy.analysis import whatif
from gpuwhy.analysis.context import RunContext
from gpuwhy.analysis.framework import pick
from gpuwhy.analysis.rules.common import MIN_PHASE_S, r, used_stats
from gpuwhy.model import DeviceInfo, Finding, Severity

# Bytes per second per lane and direction, after line encoding.
_LANE_BYTES_PER_S = {
    1: 2.5e9 * 8 / 10 / 8,
    2: 5.0e9 * 8 / 10 / 8,
    3: 8.0e9 * 128 / 130 / 8,
    4: 16.0e9 * 128 / 130 / 8,
    5: 32.0e9 * 128 / 130 / 8,
    6: 64.0e9 * 242 / 256 / 8,
}
TRANSFER_FRACTION = 0.20  # TraceML H2D_BOUND critical; XProf highly input-bound band
HEALTHY_UTIL_PCT = whatif.HEALTHY_BUSY * 100
REFERENCE = "TraceML H2D_BOUND critical at 20 % of step; XProf counts H2D time as input (20 %)"

FIXES = {
    "torch": (
        "Overlap copies with compute: `DataLoader(..., pin_memory=True)` and "
        "`x.to(device, non_blocking=True)`; send compact dtypes (uint8 images, cast/normalise on "
        "the GPU); keep tensors on the GPU between steps (no `.cpu()` round trips)."
    ),
    "tensorflow": (
        "Overlap copies with compute: end the pipeline with `.prefetch(tf.data.AUTOTUNE)` (or "
        "`tf.data.experimental.prefetch_to_device('/gpu:0')`); send compact dtypes (uint8, cast "
        "and normalise on the GPU inside the model)."
    ),
    "default": (
        "Overlap host-to-device copies with compute (pinned memory, asynchronous copies, prefetch "
        "to the device) and send compact dtypes, converting on the GPU."
    ),
}


def link_bandwidth_bytes_per_s(gen: int | None, width: int | None) -> float | None:
    """One direction's bandwidth of a PCIe link of this generation and width, or None."""
    if gen is None or width is None or width <= 0:
        return None
    lane = _LANE_BYTES_PER_S.get(gen)
    if lane is None:  # a generation newer than this table: assume the last known rate
        lane = _LANE_BYTES_PER_S[max(_LANE_BYTES_PER_S)] if gen > 6 else None
    return None if lane is None else lane * width


def _device(ctx: RunContext, index: int) -> DeviceInfo | None:
    return next((d for d in ctx.devices if d.index == index), None)


def check(ctx: RunContext) -> list[Finding]:
    train = ctx.training_phase()
    if train is None or train.time_s < MIN_PHASE_S:
        return []
    findings = []
    for index, stats in used_stats(ctx, train.name).items():
        info = _device(ctx, index)
        link = link_bandwidth_bytes_per_s(
            info.pcie_gen_max if info else None, info.pcie_width_max if info else None
        )
        if link is None or stats.util_mean_pct is None or stats.util_mean_pct >= HEALTHY_UTIL_PCT:
            continue
        rx = (stats.pcie_rx_mean_kbps or 0.0) * 1000  # NVML KB/s
        tx = (stats.pcie_tx_mean_kbps or 0.0) * 1000
        fraction = max(rx, tx) / link
        if fraction < TRANSFER_FRACTION:
            continue
        fraction = min(fraction, 1.0)
        est = whatif.overlap_transfers(ctx.duration_s, train.name, train.time_s, fraction)
        findings.append(
            Finding(
                code="TRANSFER_BOUND",
                severity=Severity.WARNING,
                title=(
                    f"GPU {index}'s PCIe link is moving data {fraction:.0%} of '{train.name}' "
                    f"while the GPU is {stats.util_mean_pct:.0f} % busy"
                ),
                evidence={
                    "gpu": index,
                    "phase": train.name,
                    "pcie_rx_bytes_per_s": round(rx),
                    "pcie_tx_bytes_per_s": round(tx),
                    "link_bytes_per_s": round(link),
                    "link": f"gen{info.pcie_gen_max} x{info.pcie_width_max}" if info else None,
                    "link_busy_fraction": r(fraction),
                    "gpu_util_pct": r(stats.util_mean_pct, 1),
                    "threshold_fraction": TRANSFER_FRACTION,
                    "reference": REFERENCE,
                },
                fix=pick(ctx.framework, FIXES),
                speedup=est.speedup,
                speedup_method=est.method,
            )
        )
    # One finding: the worst link (data-parallel ranks copy alike; their savings do not add).
    return [max(findings, key=lambda f: f.evidence["link_busy_fraction"])] if findings else []
