"""The minimal summary read straight from a recording.

The GPU samples here are constructed (this machine has no GPU): they imitate NVML readings of
two devices so the arithmetic can be checked exactly.
"""

from __future__ import annotations

from pathlib import Path

from gpuwhy.model import DeviceInfo, GpuSample, Span, SpanKind
from gpuwhy.recording.reader import Recording
from gpuwhy.recording.writer import RecordingWriter
from gpuwhy.report.summary import basic_summary, format_basic_summary


def test_summary_of_a_constructed_two_gpu_recording(tmp_path: Path) -> None:
    path = tmp_path / "r.gpuwhy.db"
    writer = RecordingWriter(path)
    writer.add_devices([DeviceInfo(0, "Constructed GPU A"), DeviceInfo(1, "Constructed GPU B")])
    writer.set_meta("start_ns", 0)
    writer.set_meta("end_ns", 4_000_000_000)
    writer.set_meta("exit_code", 0)
    writer.set_meta("command", ["python", "train.py"])
    for t, util in enumerate([90, 100, 80, 90]):
        writer.put(GpuSample(t, 0, util_gpu_pct=util, memory_used_bytes=(t + 1) * 2**30))
        writer.put(GpuSample(t, 1, util_gpu_pct=None))
    for step in range(3):
        writer.put(Span("train", SpanKind.STEP, step, step + 1, step=step * 8, steps=8))
    writer.put(Span("train", SpanKind.PHASE, 0, 10))
    writer.close()
    with Recording.open(path) as recording:
        summary = basic_summary(recording)
    assert summary.duration_s == 4.0 and summary.exit_code == 0 and summary.complete
    assert summary.steps == 24
    gpu0, gpu1 = summary.gpus
    assert (gpu0.samples, gpu0.mean_util_gpu_pct) == (4, 90.0)
    assert gpu0.peak_memory_used_bytes == 4 * 2**30
    assert (gpu1.samples, gpu1.mean_util_gpu_pct) == (4, None)
    lines = format_basic_summary(summary)
    assert lines[0] == "gpuwhy summary: 4.0 s, exit code 0"
    assert "GPU 0 Constructed GPU A: mean utilization 90 % over 4 samples" in lines[1]
    assert "peak memory 4.0 GiB" in lines[1]
    assert "mean utilization n/a" in lines[2]
    assert lines[3] == "  steps reported by the hooks: 24"


def test_summary_of_an_incomplete_recording_without_gpus(tmp_path: Path) -> None:
    path = tmp_path / "r.gpuwhy.db"
    writer = RecordingWriter(path)
    writer.flush()  # a run that was killed: never closed
    with Recording.open(path) as recording:
        summary = basic_summary(recording)
    assert summary.gpus == [] and summary.steps == 0 and not summary.complete
    text = "\n".join(format_basic_summary(summary))
    assert "no GPU was recorded" in text and "incomplete" in text
    writer.close()
