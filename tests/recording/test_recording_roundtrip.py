"""Write real recording files and read them back: every record type, filters, flush and close.

The samples here are constructed values (not GPU readings): they exercise the file format.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from pathlib import Path

import pytest

from gpuwhy.errors import RecordingError
from gpuwhy.model import (
    DeviceInfo,
    Event,
    GpuSample,
    HostSample,
    Span,
    SpanKind,
    UtilKind,
    UtilSample,
)
from gpuwhy.recording import Recording, RecordingWriter, schema

FULL_GPU = GpuSample(  # constructed: every field set, values of realistic magnitude
    t_ns=1_234_567_890_123_456,
    device=1,
    util_gpu_pct=97,
    util_mem_pct=41,
    memory_used_bytes=79_456_354_304,
    sm_clock_mhz=1980,
    power_mw=612_345,
    temperature_c=71,
    pcie_tx_kbps=1_234_567,
    pcie_rx_kbps=25_000_000,
    pcie_gen=5,
    pcie_width=16,
    clock_event_reasons=0x4 | 0x20,
    sm_active_permille=873,
    sm_occupancy_permille=412,
    tensor_active_permille=655,
    dram_active_permille=1000,
    job_memory_bytes=78_000_000_000,
    job_sm_pct=95,
)
DEVICES = [
    DeviceInfo(
        0,
        "NVIDIA H100 80GB HBM3",
        uuid="GPU-0a",
        pci_bus_id="00000000:18:00.0",
        memory_total_bytes=85_520_809_984,
        compute_capability=(9, 0),
        sm_clock_max_mhz=1980,
        power_limit_mw=700_000,
        pcie_gen_max=5,
        pcie_width_max=16,
        mig_mode=False,
        gpm_supported=True,
    ),
    DeviceInfo(1, "Tesla T4"),
]


def _write(path: Path, records: list, **meta: object) -> None:
    writer = RecordingWriter(path)
    writer.add_devices(DEVICES)
    for key, value in meta.items():
        writer.set_meta(key, value)
    for record in records:
        writer.put(record)
    writer.close()


def test_schema_columns_follow_the_record_fields() -> None:
    # The reader builds records positionally: a new model field needs a schema version bump.
    assert tuple(f.name for f in dataclasses.fields(GpuSample)) == schema.GPU_COLUMNS
    assert tuple(f.name for f in dataclasses.fields(UtilSample)) == schema.UTIL_COLUMNS
    assert len(schema.HOST_COLUMNS) == len(dataclasses.fields(HostSample))
    assert len(schema.DEVICE_COLUMNS) == len(dataclasses.fields(DeviceInfo)) + 1  # cc split


def test_every_record_type_round_trips_exactly(tmp_path: Path) -> None:
    path = tmp_path / "run.gpuwhy.db"
    records = [
        FULL_GPU,
        GpuSample(t_ns=5, device=0),  # everything unsupported: all None
        UtilSample(t_ns=7, device=0, kind=UtilKind.GPU, value_pct=100),
        UtilSample(t_ns=7, device=0, kind=UtilKind.MEMORY, value_pct=0),
        HostSample(
            t_ns=9,
            cpu_system_pct=12.3,
            job_cpu_pct=187.4,
            job_rss_bytes=3 << 30,
            job_processes=9,
            memory_available_bytes=20 << 30,
        ),
        HostSample(t_ns=10),
        Span("train", SpanKind.PHASE, 100, 900, pid=4242),
        Span("train", SpanKind.STEP, 110, 150, step=0, steps=4, pid=4242),
        Span("validation données", SpanKind.WAIT, 160, 170, step=3, pid=None),
        Event(t_ns=11, kind="child_exited", message="exit 0", data={"code": 0, "why": ["a"]}),
    ]
    _write(path, records, command=["python", "train.py"], start_ns=5, environment={"x": [1]})
    with Recording.open(path) as rec:
        assert rec.complete
        assert rec.devices == DEVICES
        assert rec.meta["command"] == ["python", "train.py"]
        assert rec.meta["environment"] == {"x": [1]}
        assert rec.meta["schema_version"] == schema.RECORDING_FORMAT_VERSION
        assert rec.meta["writer_dropped"] == 0
        assert list(rec.gpu_samples()) == [records[1], FULL_GPU]
        assert list(rec.util_samples()) == records[2:4]
        assert list(rec.host_samples()) == records[4:6]
        assert list(rec.spans()) == records[6:9]
        assert list(rec.events()) == [records[9]]
        assert rec.time_range() == (5, FULL_GPU.t_ns)


def test_filters_are_half_open_ranges_in_time_order(tmp_path: Path) -> None:
    path = tmp_path / "run.gpuwhy.db"
    samples = [GpuSample(t, d, util_gpu_pct=t % 100) for t in range(0, 1000, 10) for d in (1, 0)]
    spans = [Span("train", SpanKind.STEP, t, t + 5, step=t) for t in range(900, 0, -100)]
    spans += [Span("eval", SpanKind.STEP, 50, 60, step=0), Span("train", SpanKind.PHASE, 0, 999)]
    _write(path, samples + spans)
    with Recording.open(path) as rec:
        got = list(rec.gpu_samples(device=0, start_ns=100, end_ns=200))
        assert [s.t_ns for s in got] == list(range(100, 200, 10))
        assert {s.device for s in got} == {0}
        every = list(rec.gpu_samples())
        assert [(s.t_ns, s.device) for s in every] == sorted((s.t_ns, s.device) for s in samples)
        steps = list(rec.spans(kind=SpanKind.STEP, phase="train"))
        assert [s.start_ns for s in steps] == list(range(100, 1000, 100))
        assert [s.phase for s in rec.spans(kind=SpanKind.STEP)][:2] == ["eval", "train"]
        assert next(s.kind for s in rec.spans(phase="train")) == SpanKind.PHASE
        assert list(rec.spans(phase="no such phase")) == []
        averages = rec.gpu_averages(start_ns=0, end_ns=100)
        assert averages[0]["samples"] == 10 and averages[0]["util_gpu_pct"] == 45.0
        assert averages[1]["memory_used_bytes"] is None


def test_flush_makes_records_visible_to_a_reader_while_recording(tmp_path: Path) -> None:
    path = tmp_path / "live.gpuwhy.db"
    writer = RecordingWriter(path, flush_interval_s=60.0)
    try:
        writer.put(GpuSample(1, 0, util_gpu_pct=3))
        writer.flush()
        with Recording.open(path) as rec:
            assert not rec.complete
            assert [s.util_gpu_pct for s in rec.gpu_samples()] == [3]
    finally:
        writer.close()


def test_records_are_committed_every_flush_interval_without_flush(tmp_path: Path) -> None:
    path = tmp_path / "live.gpuwhy.db"
    writer = RecordingWriter(path, flush_interval_s=0.1)
    try:
        writer.put(HostSample(1, cpu_system_pct=1.0))
        deadline = time.monotonic() + 5
        seen: list[HostSample] = []
        while not seen and time.monotonic() < deadline:
            time.sleep(0.05)
            with Recording.open(path) as rec:
                seen = list(rec.host_samples())
        assert seen == [HostSample(1, cpu_system_pct=1.0)]
    finally:
        writer.close()


def test_full_queue_drops_and_counts_instead_of_blocking(tmp_path: Path) -> None:
    path = tmp_path / "drops.gpuwhy.db"
    writer = RecordingWriter(path, flush_interval_s=60.0, max_queue=10)
    started = time.perf_counter()
    for t in range(100):
        writer.put(GpuSample(t, 0))
    assert time.perf_counter() - started < 0.5
    writer.set_meta("note", "meta is never dropped")
    writer.close()
    writer.put(GpuSample(1000, 0))  # after close: dropped, no error
    assert writer.dropped == 91
    with Recording.open(path) as rec:
        assert [s.t_ns for s in rec.gpu_samples()] == list(range(10))
        assert rec.meta["writer_dropped"] == 90
        assert rec.meta["note"] == "meta is never dropped"


def test_close_leaves_one_self_contained_file(tmp_path: Path) -> None:
    path = tmp_path / "one.gpuwhy.db"
    _write(path, [GpuSample(1, 0)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.gpuwhy.db"]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    copy = tmp_path / "copy.db"
    copy.write_bytes(path.read_bytes())
    with Recording.open(copy) as rec:
        assert [s.t_ns for s in rec.gpu_samples()] == [1]


def test_close_is_idempotent_and_an_existing_file_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "run.gpuwhy.db"
    writer = RecordingWriter(path)
    writer.close()
    writer.close()
    with pytest.raises(RecordingError, match="already exists"):
        RecordingWriter(path)
    with pytest.raises(RecordingError) as info:
        RecordingWriter(tmp_path / "no" / "such" / "dir.gpuwhy.db")
    assert "No such file or directory" in info.value.one_line()
    assert "folder exists" in info.value.one_line()


def test_a_malformed_record_is_dropped_alone(tmp_path: Path) -> None:
    path = tmp_path / "odd.gpuwhy.db"
    writer = RecordingWriter(path)
    writer.put(GpuSample(1, 0, util_gpu_pct=5))
    writer.put(GpuSample(2, 0, memory_used_bytes=1 << 70))  # beyond a 64-bit integer
    writer.put(HostSample(3, cpu_system_pct="busy"))  # type: ignore[arg-type]
    writer.put(Span(None, SpanKind.STEP, 4, 5))  # type: ignore[arg-type]
    writer.put(GpuSample(6, 0, util_gpu_pct=7))
    writer.close()
    assert writer.error is None and writer.dropped == 3
    with Recording.open(path) as rec:
        assert [s.t_ns for s in rec.gpu_samples()] == [1, 6]
        assert rec.meta["writer_dropped"] == 3
