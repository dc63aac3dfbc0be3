"""PAGEABLE_COPY: the host blocks in copies from pageable memory to the GPU.

The hooks time each `.to(device)`/`.cuda()` of a CPU tensor that is not pinned
(hooks/sync_counting.py): the driver synchronises the stream, then stages the bytes through a
bounce buffer at a fraction of the link's rate, and the host waits throughout
(references.md#cuda-pageable-copies); from pinned memory with `non_blocking=True` the copy is
queued and can overlap compute. The bands are the profiler-trace finding's (analysis/kernels):
XProf counts host-to-device time as input time, >= 5 % of the phase moderate, >= 20 % high
(references.md#xprof-input-pipeline). Judged per phase from the host's own clock, so it needs no
GPU samples; the saving is bounded by them where they exist (whatif.pin_copies). Data-parallel
ranks each block in their own copies at once: the figures are one process's, the sum over the
processes that stepped in the phase.
"""

from __future__ import annotations

from gpuwhy.analysis import whatif
from gpuwhy.analysis.context import PageableCopies, RunContext
from gpuwhy.analysis.rules.common import MIN_PHASE_S, phase_util, r
from gpuwhy.analysis.rules.input_bound import HIGH_FRACTION, MODERATE_FRACTION
from gpuwhy.analysis.rules.transfer import link_bandwidth_bytes_per_s
from gpuwhy.model import Finding, Severity

REFERENCE = (
    "CUDA API synchronization behavior (pageable host-to-device copies block the host); "
    "XProf counts host-to-device time as input time (>= 5 % moderate, >= 20 % high)"
)
FIX = (
    "Copy from pinned memory, asynchronously: `DataLoader(..., pin_memory=True)` and "
    "`batch.to(device, non_blocking=True)` (or `tensor.pin_memory()` once for tensors kept on "
    "the host and copied every step); to overlap the copy with the step's compute, copy the next "
    "batch on a side stream (`with torch.cuda.stream(copy_stream): ...`) one step ahead; copy "
    "results back every N steps, not every step."
)
"""The fix for pageable copies, whether a recording or a profiler trace found them."""


def _per_process(ctx: RunContext, phase: str) -> PageableCopies | None:
    """The phase's pageable copies of one process: every process's sum over the processes that
    stepped in it (data-parallel ranks copy alike, each on its own host thread)."""
    copies = ctx.pageable_copies.get(phase)
    processes = max(len(ctx.ranks.get(phase, ())), 1)
    if copies is None or processes == 1:
        return copies
    return PageableCopies(
        copies.count // processes, copies.seconds / processes, copies.bytes // processes
    )


def _fraction(copies: PageableCopies | None, phase_s: float) -> float:
    return min(copies.seconds / phase_s, 1.0) if copies is not None and phase_s > 0 else 0.0


def copy_fraction(ctx: RunContext, phase: str) -> float:
    """The share of the phase's time a process spent blocked in pageable copies (0 if none)."""
    stats = ctx.phases.get(phase)
    return _fraction(_per_process(ctx, phase), stats.time_s) if stats is not None else 0.0


def _link_bytes_per_s(ctx: RunContext) -> float | None:
    """The slowest link of the GPUs the job used: where the bytes go (one GPU, mostly)."""
    used = set(ctx.used_devices())
    links = [
        link_bandwidth_bytes_per_s(d.pcie_gen_max, d.pcie_width_max)
        for d in ctx.devices
        if d.index in used
    ]
    known = [link for link in links if link]
    return min(known) if known else None


def check(ctx: RunContext) -> list[Finding]:
    findings = []
    link = _link_bytes_per_s(ctx)
    for phase in ctx.named_phases:
        copies = _per_process(ctx, phase.name)
        if copies is None or phase.steps == 0 or phase.time_s < MIN_PHASE_S:
            continue
        fraction = _fraction(copies, phase.time_s)
        if fraction < MODERATE_FRACTION:
            continue
        high = fraction >= HIGH_FRACTION
        util = phase_util(ctx, phase)
        link_s = copies.bytes / link if link else None
        est = whatif.pin_copies(
            ctx.duration_s, phase.name, phase.time_s, copies.seconds, link_s, util
        )
        rate = copies.bytes / copies.seconds if copies.seconds > 0 else None
        findings.append(
            Finding(
                code="PAGEABLE_COPY",
                severity=Severity.WARNING if high else Severity.INFO,
                title=(
                    f"'{phase.name}' blocks in copies from pageable host memory "
                    f"{fraction:.0%} of its time"
                ),
                evidence={
                    "phase": phase.name,
                    "pageable_copy_fraction": r(fraction),
                    "copies": copies.count,
                    "copy_s": r(copies.seconds),
                    "copied_bytes": copies.bytes,
                    "copy_bytes_per_s": round(rate) if rate else None,
                    "link_bytes_per_s": round(link) if link else None,
                    "gpu_util_pct": r(util, 1),
                    "saved_s": r(est.saved_s),
                    "phase_speedup": whatif.phase_speedup(phase.time_s, est.saved_s),
                    "band": "high" if high else "moderate",
                    "threshold_fraction": HIGH_FRACTION if high else MODERATE_FRACTION,
                    "reference": REFERENCE,
                },
                fix=FIX,
                speedup=est.speedup,
                speedup_method=est.method,
            )
        )
    return findings
