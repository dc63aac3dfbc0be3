"""Recordings at scale: compact blocks, downsampled tiers that agree with the raw samples, flat
memory, and format-1 files refused with a one-line message.

The recordings here are synthetic (tests/support/synth: constructed data shaped like a
training run on H100s, labelled so in their meta) or constructed in the test.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from gpuwhy.errors import RecordingError
from gpuwhy.model import NS_PER_S, GpuSample, HostSample, Span, SpanKind, UtilKind, UtilSample
from gpuwhy.recording import Recording, RecordingWriter
from gpuwhy.recording.streams import GPU_METRICS, SLOT_NS
from support import format_1_file
from support.synth import synthesize

T0 = 5_000 * NS_PER_S + 123_456  # not aligned to a second: buckets cut slots unevenly


def _expected(
    samples: list[Any], fields: tuple[str, ...], width_ns: int, key: str | None
) -> dict[tuple[int, Any], dict[str, tuple[Any, ...]]]:
    """Buckets computed the obvious way from raw records: (start, key) -> field -> summary."""
    groups: dict[tuple[int, Any], list[Any]] = defaultdict(list)
    for sample in samples:
        groups[(sample.t_ns // width_ns * width_ns, getattr(sample, key) if key else None)].append(
            sample
        )
    result = {}
    for bucket, members in groups.items():
        summary = {"samples": (len(members),)}
        for name in fields:
            values = [getattr(s, name) for s in members if getattr(s, name) is not None]
            if values:
                summary[name] = (len(values), sum(values), min(values), max(values))
        result[bucket] = summary
    return result


def _got(buckets: Any) -> dict[tuple[int, Any], dict[str, tuple[Any, ...]]]:
    result = {}
    for bucket in buckets:
        summary = {"samples": (bucket.samples,)}
        summary.update({name: tuple(s) for name, s in bucket.metrics.items()})
        result[(bucket.t_ns, bucket.device)] = summary
    return result


def _constructed(path: Path) -> list[Any]:
    """Irregular constructed samples: NULLs, late and out-of-order records, a slot left open."""
    records: list[Any] = []
    for i in range(3_000):  # 5 minutes at 10 Hz on 2 GPUs, then a later slot
        t = T0 + i * 100_000_000 + (i * 7919) % 3_000_000
        for device in (0, 1):
            records.append(
                GpuSample(
                    t,
                    device,
                    util_gpu_pct=(i * 13 + device) % 101,
                    memory_used_bytes=None if i % 97 == 0 else (40 << 30) + i * 4096,
                    power_mw=300_000 + (i * 31) % 50_000,
                    pcie_gen=5,
                    clock_event_reasons=(4 if i % 50 < 5 else 0) | (1 if i % 333 == 0 else 0),
                    sm_active_permille=None if device else (i * 17) % 1001,
                )
            )
        records.append(UtilSample(t + 30_000_000, 0, UtilKind.GPU, (i * 3) % 101))
        records.append(UtilSample(t + 30_000_000, 0, UtilKind.MEMORY, (i * 5) % 101))
        if i % 5 == 0:
            records.append(HostSample(t, cpu_system_pct=(i % 1000) / 10, job_rss_bytes=i << 20))
    late = GpuSample(T0 + 5 * 100_000_000 + 1, 1, util_gpu_pct=55)  # a slot closed long ago
    records.append(late)
    writer = RecordingWriter(path)
    for record in records:
        writer.put(record)
    writer.close()
    records.sort(key=lambda r: (r.t_ns, getattr(r, "device", 0)))
    return records


def test_tiers_agree_with_raw_samples_exactly(tmp_path: Path) -> None:
    path = tmp_path / "tiers.gpuwhy.db"
    records = _constructed(path)
    gpu = [r for r in records if isinstance(r, GpuSample)]
    util = [r for r in records if isinstance(r, UtilSample)]
    host = [r for r in records if isinstance(r, HostSample)]
    with Recording.open(path) as rec:
        assert list(rec.gpu_samples()) == gpu  # the late sample read back in its place
        for width_s in (1, 60, 5, 120):
            width = width_s * NS_PER_S
            assert _got(rec.gpu_tiers(width)) == _expected(gpu, GPU_METRICS, width, "device")
            host_fields = ("cpu_system_pct", "job_rss_bytes")
            assert _got(rec.host_tiers(width)) == _expected(host, host_fields, width, None)
        buckets = list(rec.util_tiers(NS_PER_S, device=0))
        assert sum(b.metrics["gpu_pct"].n for b in buckets) == len(util) // 2
        assert sum(b.metrics["gpu_pct"].total for b in buckets) == sum(
            u.value_pct for u in util if u.kind is UtilKind.GPU
        )
        # Reason bits are counted per bit: 0x4 (power cap) and 0x1 (idle) separately.
        minute = list(rec.gpu_tiers(60 * NS_PER_S, device=0))
        assert sum(b.reason_counts.get(4, 0) for b in minute) == sum(
            1 for s in gpu if s.device == 0 and s.clock_event_reasons & 4
        )
        assert sum(b.reason_counts.get(1, 0) for b in minute) == sum(
            1 for s in gpu if s.device == 0 and s.clock_event_reasons & 1
        )


def test_window_summaries_are_exact_for_any_window(tmp_path: Path) -> None:
    path = tmp_path / "summary.gpuwhy.db"
    records = _constructed(path)
    gpu = [r for r in records if isinstance(r, GpuSample)]
    with Recording.open(path) as rec:
        for start, end in (
            (T0 + 12_345_678, T0 + 251 * NS_PER_S + 7),
            (T0 + 61 * NS_PER_S, T0 + 62 * NS_PER_S + 50_000_000),
            (T0 - 10**9, T0 + 10**12),
            (T0, T0 + 1),
        ):
            inside = [s for s in gpu if start <= s.t_ns < end]
            got = rec.gpu_summary(start, end)
            want = _expected(inside, GPU_METRICS, 1 << 62, "device")
            assert {d: v for (_, d), v in _got(got.values()).items()} == {
                d: v for (_, d), v in want.items()
            }
            for device, bucket in got.items():
                values = [s.util_gpu_pct for s in inside if s.device == device]
                assert bucket.mean("util_gpu_pct") == pytest.approx(sum(values) / len(values))
                assert (bucket.t_ns, bucket.width_ns) == (start, end - start)
            averages = rec.gpu_averages(start, end)
            assert set(averages) == {s.device for s in inside}


def test_a_live_recording_reads_open_slots_from_staging(tmp_path: Path) -> None:
    path = tmp_path / "live.gpuwhy.db"
    writer = RecordingWriter(path, flush_interval_s=60.0)
    try:
        samples = [GpuSample(T0 + i * 100_000_000, 0, util_gpu_pct=i % 100) for i in range(2_500)]
        for sample in samples:
            writer.put(sample)
        writer.put(Span("train", SpanKind.STEP, T0, T0 + 5, step=0))
        writer.flush()
        with Recording.open(path) as rec:
            assert not rec.complete
            assert list(rec.gpu_samples()) == samples  # packed slots and staging rows
            tiers = list(rec.gpu_tiers(60 * NS_PER_S))
            assert sum(b.samples for b in tiers) == len(samples)
            assert [s.step for s in rec.spans()] == [0]
        with sqlite3.connect(path) as db:  # the newest slots are still staged, not packed
            assert db.execute("SELECT COUNT(*) FROM gpu_staging").fetchone()[0] > 0
        db.close()
    finally:
        writer.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM gpu_staging").fetchone()[0] == 0
    db.close()


@pytest.mark.slow
def test_synthetic_bulk_and_record_paths_write_the_same_recording(tmp_path: Path) -> None:
    bulk = synthesize(tmp_path / "bulk.gpuwhy.db", hours=0.05, gpus=3, seed=7)
    records = synthesize(tmp_path / "records.gpuwhy.db", hours=0.05, gpus=3, seed=7, via="records")
    assert bulk.gpu_samples == records.gpu_samples == 0.05 * 3600 * 10 * 3
    with Recording.open(bulk.path) as a, Recording.open(records.path) as b:
        assert a.meta["synthetic"]["seed"] == 7
        assert list(a.gpu_samples()) == list(b.gpu_samples())
        assert list(a.util_samples()) == list(b.util_samples())
        assert list(a.host_samples()) == list(b.host_samples())
        assert list(a.spans()) == list(b.spans())
        assert list(a.gpu_tiers(NS_PER_S)) == list(b.gpu_tiers(NS_PER_S))


@pytest.mark.slow
def test_an_hour_of_eight_gpus_is_compact(tmp_path: Path) -> None:
    result = synthesize(tmp_path / "hour.gpuwhy.db", hours=1.0, gpus=8, seed=1)
    size = os.path.getsize(result.path)
    assert result.gpu_samples == 3600 * 10 * 8
    # Everything in the file (buffered utilization, spans, tiers included) per GPU sample:
    # under 40 bytes keeps a day of 8 GPUs at 10 Hz under 300 MB (format 1: 80 bytes for the
    # GPU sample alone).
    per_sample = size / result.gpu_samples
    assert per_sample < 40, per_sample
    with Recording.open(result.path) as rec:
        assert sum(b.samples for b in rec.gpu_tiers(60 * NS_PER_S)) == result.gpu_samples
        idle = rec.gpu_summary(device=7)[7]
        assert idle.metrics["util_gpu_pct"].maximum == 0  # the idle GPU among eight
        busy = rec.gpu_summary(device=0)[0]
        assert busy.mean("util_gpu_pct") > 60


MEMORY_CHILD = textwrap.dedent("""
    import json, resource, sys
    from gpuwhy.recording import Recording
    from support.synth import synthesize
    peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    marks = {}
    def mark(done, total):
        if done == 5:
            marks["write_early_kib"] = peak()
    synthesize(sys.argv[1], hours=float(sys.argv[2]), gpus=8, via="records", on_slot=mark)
    marks["write_end_kib"] = peak()
    with Recording.open(sys.argv[1]) as rec:
        for count, _ in enumerate(rec.gpu_samples()):
            if count == 50_000:
                marks["read_early_kib"] = peak()
        marks["read_end_kib"] = peak()
    print(json.dumps(marks))
""")


@pytest.mark.slow
def test_writer_and_reader_memory_stay_flat(tmp_path: Path) -> None:
    tests = str(Path(__file__).resolve().parents[1])  # the child imports support.synth
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (tests, os.environ.get("PYTHONPATH")))),
    }
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD, str(tmp_path / "m.gpuwhy.db"), "0.5"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env=env,
    )
    marks = json.loads(out.stdout)
    # 144,000 GPU samples as objects would take ~30 MB; what is held is a slot or two.
    assert marks["write_end_kib"] - marks["write_early_kib"] < 12 * 1024, marks
    assert marks["read_end_kib"] - marks["read_early_kib"] < 8 * 1024, marks


def test_format_1_recordings_are_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "old.gpuwhy.db"
    format_1_file(path)
    with pytest.raises(RecordingError, match=r"older gpuwhy \(recording format 1;") as caught:
        Recording.open(path)
    assert "\n" not in str(caught.value) and "record the job again" in caught.value.fix


def test_a_damaged_block_is_a_recording_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.gpuwhy.db"
    writer = RecordingWriter(path)
    for i in range(3 * SLOT_NS // 10**8):
        writer.put(GpuSample(T0 + i * 10**8, 0, util_gpu_pct=i % 100))
    writer.close()
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE gpu_blocks SET data = X'789c0300' WHERE id = (SELECT MIN(id) FROM gpu_blocks)"
        )
    db.close()
    with Recording.open(path) as rec, pytest.raises(RecordingError, match="damaged"):
        list(rec.gpu_samples())


def test_a_fast_stream_packs_a_slot_into_several_blocks(tmp_path: Path) -> None:
    path = tmp_path / "fast.gpuwhy.db"
    samples = [
        GpuSample(T0 + i * 2_000_000, d, util_gpu_pct=(i + d) % 101)  # 500 Hz, 2 GPUs
        for i in range(6_000)
        for d in (1, 0)
    ]
    writer = RecordingWriter(path)
    for sample in samples:
        writer.put(sample)
    writer.close()
    with sqlite3.connect(path) as db:
        blocks = db.execute("SELECT COUNT(*), MAX(rows) FROM gpu_blocks").fetchone()
    db.close()
    assert blocks[0] >= 2 * 6_000 // 1024 and blocks[1] <= 1024
    with Recording.open(path) as rec:
        assert list(rec.gpu_samples()) == sorted(samples, key=lambda s: (s.t_ns, s.device))
        middle = list(
            rec.gpu_samples(device=0, start_ns=T0 + 3 * NS_PER_S, end_ns=T0 + 4 * NS_PER_S)
        )
        assert len(middle) == 500 and {s.device for s in middle} == {0}
        assert _got(rec.gpu_tiers(NS_PER_S)) == _expected(samples, GPU_METRICS, NS_PER_S, "device")
