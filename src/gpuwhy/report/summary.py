"""A minimal summary computed straight from a recording.

Used when the full analysis cannot run (or fails): the duration, each GPU's mean utilization and
the steps the hooks reported. Reads the recording's stored summaries, so it stays fast and
flat in memory for long recordings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuwhy.model import NS_PER_S, SpanKind
from gpuwhy.redact import recorded_command

if TYPE_CHECKING:
    from gpuwhy.recording.reader import Recording


@dataclass(frozen=True)
class GpuSummary:
    index: int
    name: str
    samples: int
    mean_util_gpu_pct: float | None
    peak_memory_used_bytes: int | None


@dataclass(frozen=True)
class BasicSummary:
    """The few numbers any recording can give without the analysis."""

    command: list[str]
    exit_code: int | None
    duration_s: float | None
    gpus: list[GpuSummary]
    steps: int
    complete: bool


def basic_summary(recording: Recording) -> BasicSummary:
    """Summarise ``recording`` from its exact whole-run GPU summary (stored tiers) and its step
    spans read as columns: under a second for a day of 8 GPUs."""
    meta = recording.meta
    run = recording.run_bounds()
    duration = (run[1] - run[0]) / NS_PER_S if run else None
    gpus = []
    whole = recording.gpu_summary()
    for device in recording.devices:
        bucket = whole.get(device.index)
        util = None if bucket is None else bucket.summary("util_gpu_pct")
        memory = None if bucket is None else bucket.summary("memory_used_bytes")
        gpus.append(
            GpuSummary(
                device.index,
                device.name,
                0 if bucket is None else bucket.samples,
                util.total / util.n if util is not None else None,
                None if memory is None or memory.maximum is None else int(memory.maximum),
            )
        )
    steps = sum(sum(block.steps) for block in recording.span_columns(kind=SpanKind.STEP))
    return BasicSummary(
        command=recorded_command(meta),
        exit_code=meta.get("exit_code") if isinstance(meta.get("exit_code"), int) else None,
        duration_s=duration,
        gpus=gpus,
        steps=steps,
        complete=bool(recording.complete),
    )


def format_basic_summary(summary: BasicSummary) -> list[str]:
    """Plain text lines (no colour): safe on any terminal or log file."""
    lines = []
    head = "gpuwhy summary"
    if summary.duration_s is not None:
        head += f": {summary.duration_s:.1f} s"
    if summary.exit_code is not None:
        head += f", exit code {summary.exit_code}"
    lines.append(head)
    if not summary.gpus:
        lines.append("  no GPU was recorded (no NVIDIA driver or device visible to gpuwhy)")
    for gpu in summary.gpus:
        util = "n/a" if gpu.mean_util_gpu_pct is None else f"{gpu.mean_util_gpu_pct:.0f} %"
        line = f"  GPU {gpu.index} {gpu.name}: mean utilization {util} over {gpu.samples} samples"
        if gpu.peak_memory_used_bytes is not None:
            line += f", peak memory {gpu.peak_memory_used_bytes / 2**30:.1f} GiB"
        lines.append(line)
    lines.append(
        f"  steps reported by the hooks: {summary.steps}"
        if summary.steps
        else "  no steps reported (no hooks, or the job ran no training loop)"
    )
    if not summary.complete:
        lines.append("  the recording is incomplete (gpuwhy was stopped before the job ended)")
    return lines
