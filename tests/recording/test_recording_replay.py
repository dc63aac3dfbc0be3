"""ReplaySource plays a real recording back through the Sampler (constructed sample values)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwhy.model import (
    DeviceInfo,
    GpuSample,
    HostSample,
    Record,
    Span,
    SpanKind,
    UtilKind,
    UtilSample,
)
from gpuwhy.recording import Recording, RecordingWriter
from gpuwhy.recording.replay import ReplaySource
from gpuwhy.telemetry.sampler import Sampler

T0 = 7_000_000_000_000  # the original run's monotonic start
MS = 1_000_000


def _original(path: Path) -> list[Record]:
    records: list[Record] = []
    for i in range(10):  # 1 s of a 10 Hz run on two GPUs
        t = T0 + i * 100 * MS
        records += [
            GpuSample(t, 0, util_gpu_pct=10 * i),
            GpuSample(t, 1, util_gpu_pct=5),
            HostSample(t, cpu_system_pct=float(i)),
        ]
        records.append(UtilSample(t + 50 * MS, 0, UtilKind.GPU, 99))
    writer = RecordingWriter(path)
    writer.add_devices([DeviceInfo(0, "constructed A"), DeviceInfo(1, "constructed B")])
    for record in records:
        writer.put(record)
    writer.put(Span("train", SpanKind.PHASE, T0, T0 + 10**9))
    writer.close()
    return records


def test_samples_fall_due_in_scaled_real_time(tmp_path: Path) -> None:
    path = tmp_path / "original.gpuwhy.db"
    _original(path)
    source = ReplaySource(path, speed=2.0)
    assert source.available()
    assert [d.name for d in source.open()] == ["constructed A", "constructed B"]
    anchor = 50 * 10**9
    first = source.read(anchor)
    assert [type(r).__name__ for r in first] == ["GpuSample", "GpuSample", "HostSample"]
    assert all(r.t_ns == anchor for r in first)
    # 100 ms later at speed 2: the recording's first 200 ms are due.
    second = source.read(anchor + 100 * MS)
    assert [r.t_ns - anchor for r in second] == [25 * MS] + [50 * MS] * 3 + [75 * MS] + [
        100 * MS
    ] * 3
    assert not source.exhausted
    rest = source.read(anchor + 10**9)
    assert source.exhausted and len(first) + len(second) + len(rest) == 40
    assert source.read(anchor + 2 * 10**9) == []
    source.close()


def test_replay_through_a_sampler_into_a_new_recording_keeps_every_sample(tmp_path: Path) -> None:
    original = _original(tmp_path / "original.gpuwhy.db")
    source = ReplaySource(tmp_path / "original.gpuwhy.db", shift_time=False)
    writer = RecordingWriter(tmp_path / "copy.gpuwhy.db")
    now = [0]
    sampler = Sampler([source], writer.put, clock=lambda: now[0])
    writer.add_devices(sampler.open_sources())
    while not source.exhausted:
        now[0] += 100 * MS
        sampler.tick()
    assert sampler.latest().gpus[0].util_gpu_pct == 90
    sampler.stop()
    writer.close()
    with Recording.open(tmp_path / "copy.gpuwhy.db") as copy:
        assert [d.index for d in copy.devices] == [0, 1]
        replayed = [*copy.gpu_samples(), *copy.util_samples(), *copy.host_samples()]
        assert sorted(replayed, key=repr) == sorted(original, key=repr)
        assert list(copy.spans()) == []  # spans are not telemetry


def test_an_unreadable_recording_is_unavailable_not_an_exception(tmp_path: Path) -> None:
    source = ReplaySource(tmp_path / "missing.gpuwhy.db")
    assert not source.available()
    assert source.unavailable_reason and "no recording at" in source.unavailable_reason
    with pytest.raises(ValueError):
        ReplaySource(tmp_path / "x", speed=0)
