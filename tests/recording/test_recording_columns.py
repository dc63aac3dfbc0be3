"""Reading long recordings without an object per record: segment summaries, tiers and spans as
columns, row counts, and column-selective block decoding — each checked against the plain
record-by-record reads on the same file.

Recordings are constructed here (irregular samples, NULLs, late records, open slots) or
synthetic (tests/support/synth: constructed data shaped like a training run on H100s,
labelled so in their meta).
"""

from __future__ import annotations

import itertools
import math
import random
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from test_recording_scale import T0, _constructed

from gpuwhy.errors import RecordingError
from gpuwhy.model import NS_PER_S, GpuSample, SpanKind
from gpuwhy.recording import Recording, RecordingWriter, codec
from gpuwhy.recording.streams import SLOT_NS
from support.synth import synthesize

S = NS_PER_S


def _bounds(rng: random.Random, low: int, high: int, count: int) -> list[int]:
    """Random cut points, some on whole minutes and seconds, one before and one after."""
    points = {low - 7 * S, high + 3 * S}
    for _ in range(count):
        t = rng.randrange(low, high)
        points.add(rng.choice((t, t // SLOT_NS * SLOT_NS, t // S * S, t + 50_000)))
    return sorted(points)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("synth") / "quarter.gpuwhy.db"
    synthesize(path, hours=0.25, gpus=3, seed=11)
    return path


def test_segment_summaries_equal_a_summary_of_each_segment(synthetic: Path) -> None:
    rng = random.Random(5)
    with Recording.open(synthetic) as rec:
        low, high = rec.time_range()
        bounds = _bounds(rng, low, high, 40)
        gpu, util = rec.gpu_segments(bounds), rec.util_segments(bounds)
        host = rec.host_segments(bounds)
        assert len(gpu) == len(util) == len(host) == len(bounds) - 1
        for i, (start, end) in enumerate(itertools.pairwise(bounds)):
            assert gpu[i] == rec.gpu_summary(start, end)
            assert util[i] == rec.util_summary(start, end)
            assert host[i] == rec.host_summary(start, end)
        assert sum(b.samples for found in gpu for b in found.values()) == sum(
            1 for _ in rec.gpu_samples()
        )
        one = rec.gpu_segments(bounds, device=2)
        assert [list(found) for found in one] == [[2] if 2 in found else [] for found in gpu]


def test_segment_summaries_of_chosen_metrics_leave_the_others_out(synthetic: Path) -> None:
    with Recording.open(synthetic) as rec:
        low, high = rec.time_range()
        bounds = _bounds(random.Random(9), low, high, 25)
        full = rec.gpu_segments(bounds)
        some = rec.gpu_segments(bounds, metrics=("util_gpu_pct", "memory_used_bytes"))
        for a, b in zip(full, some, strict=True):
            assert set(a) == set(b)
            for device, bucket in b.items():
                assert bucket.samples == a[device].samples
                assert set(bucket.metrics) <= {"util_gpu_pct", "memory_used_bytes"}
                for name in bucket.metrics:
                    assert bucket.summary(name) == a[device].summary(name)
                assert bucket.reason_counts == {}


def test_segment_summaries_of_irregular_and_live_files(tmp_path: Path) -> None:
    path = tmp_path / "irregular.gpuwhy.db"
    _constructed(path)  # NULLs, a late sample in a slot closed long before, uneven times
    rng = random.Random(3)
    with Recording.open(path) as rec:
        low, high = rec.time_range()
        bounds = _bounds(rng, low, high, 30)
        for i, found in enumerate(rec.gpu_segments(bounds)):
            assert found == rec.gpu_summary(bounds[i], bounds[i + 1])
        with pytest.raises(ValueError, match="increasing"):
            rec.gpu_segments([low, low])
        assert rec.gpu_segments([low]) == []

    live = tmp_path / "live.gpuwhy.db"
    writer = RecordingWriter(live, flush_interval_s=60.0)
    try:
        for i in range(2_500):
            writer.put(GpuSample(T0 + i * 10**8, i % 2, util_gpu_pct=i % 100))
        writer.flush()
        with Recording.open(live) as rec:  # the newest slots are still staging rows
            low, high = rec.time_range()
            bounds = _bounds(rng, low, high, 12)
            for i, found in enumerate(rec.gpu_segments(bounds)):
                assert found == rec.gpu_summary(bounds[i], bounds[i + 1])
    finally:
        writer.close()


def _summed(parts: Any) -> dict[tuple[Any, int], dict[str, list[Any]]]:
    """Tier columns added up per (key, bucket), as a consumer of parts does."""
    found: dict[tuple[Any, int], dict[str, list[Any]]] = defaultdict(dict)
    for part in parts:
        for i, t in enumerate(part.t_ns):
            entry = found[(part.device, t)]
            samples = entry.setdefault("samples", [0])
            samples[0] += part.samples[i]
            for name, m in part.metrics.items():
                if m.n[i]:
                    held = entry.setdefault(name, [0, 0, math.inf, -math.inf])
                    held[0] += m.n[i]
                    held[1] += m.total[i]
                    held[2] = min(held[2], m.minimum[i])
                    held[3] = max(held[3], m.maximum[i])
            if part.reasons_seen is not None:
                entry.setdefault("reasons", [0])[0] |= part.reasons_seen[i]
    return found


def _buckets(buckets: Any, names: tuple[str, ...]) -> dict[tuple[Any, int], dict[str, list[Any]]]:
    found: dict[tuple[Any, int], dict[str, list[Any]]] = {}
    for bucket in buckets:
        entry: dict[str, list[Any]] = {"samples": [bucket.samples]}
        for name in names:
            summary = bucket.summary(name)
            if summary is not None:
                entry[name] = list(summary)
        if "clock_event_reasons" in names:
            entry["reasons"] = [sum(bucket.reason_counts)]
        found[(bucket.device, bucket.t_ns)] = entry
    return found


@pytest.mark.parametrize("width_s", [1, 5, 7, 60, 120])
def test_tier_columns_add_up_to_the_merged_tiers(tmp_path: Path, width_s: int) -> None:
    path = tmp_path / "irregular.gpuwhy.db"
    _constructed(path)
    gpu_names = ("util_gpu_pct", "memory_used_bytes", "power_mw", "clock_event_reasons")
    width = width_s * S
    with Recording.open(path) as rec:
        low, high = rec.time_range()
        for start, end in ((None, None), (low + 3 * S + 5, high - 61 * S)):
            got = _summed(rec.gpu_tier_columns(width, start, end, gpu_names))
            assert got == _buckets(rec.gpu_tiers(width, start_ns=start, end_ns=end), gpu_names)
            got = _summed(rec.util_tier_columns(width, start, end, ("gpu_pct",)))
            assert got == _buckets(rec.util_tiers(width, start_ns=start, end_ns=end), ("gpu_pct",))
            host_names = ("cpu_system_pct", "job_rss_bytes")
            got = _summed(rec.host_tier_columns(width, start, end, host_names))
            assert got == _buckets(rec.host_tiers(width, start_ns=start, end_ns=end), host_names)


def test_span_columns_hold_the_same_spans_in_any_window(synthetic: Path) -> None:
    with Recording.open(synthetic) as rec:
        low, high = rec.time_range()
        windows = [
            (None, None),
            (low + 100 * S, low + 400 * S),
            (low + 237 * S + 1, low + 238 * S),
            (None, low + 60 * S),
            (high - 30 * S, None),
        ]
        for start, end in windows:
            for kind in (None, SpanKind.PHASE, SpanKind.STEP, SpanKind.WAIT):
                want = sorted(
                    (s.kind, s.phase, s.pid, s.start_ns, s.end_ns, s.step, s.steps)
                    for s in rec.spans(kind=kind)
                    if (start is None or s.start_ns >= start or s.end_ns > start)
                    and (end is None or s.start_ns < end)
                )
                got = sorted(
                    (b.kind, b.phase, b.pid, t, t + d, step, n)
                    for b in rec.span_columns(kind, start, end)
                    for t, d, step, n in zip(
                        b.start_ns, b.duration_ns, b.step, b.steps, strict=True
                    )
                )
                assert got == want, (start, end, kind)
                if start is None and end is None:
                    assert rec.rows_at_most("span", kind=kind) == len(want)
        assert rec.rows_at_most("gpu") == sum(1 for _ in rec.gpu_samples())
        assert rec.rows_at_most("gpu", low + 120 * S, low + 180 * S) >= sum(
            1 for _ in rec.gpu_samples(start_ns=low + 120 * S, end_ns=low + 180 * S)
        )


def test_decoding_chosen_columns_gives_the_same_values(tmp_path: Path) -> None:
    rng = random.Random(1)
    for _ in range(300):
        rows = rng.randrange(1, 80)
        columns: list[list[int | None]] = []
        for _ in range(rng.randrange(1, 9)):
            shape = rng.randrange(5)
            if shape == 0:
                columns.append([None] * rows)
            elif shape == 1:
                columns.append([rng.randrange(-9, 9)] * rows)
            elif shape == 2:
                columns.append([rng.randrange(-(2**40), 2**40) for _ in range(rows)])
            elif shape == 3:
                columns.append([rng.choice((None, rng.randrange(1000))) for _ in range(rows)])
            else:
                columns.append([rng.choice((-(2**63), 2**63 - 1)) for _ in range(rows)])
        data = codec.encode(columns)
        assert codec.decode(data, len(columns)) == columns
        skip = set(rng.sample(range(len(columns)), rng.randrange(len(columns) + 1)))
        decoded = codec.decode(data, len(columns), skip)
        assert decoded == [[None] * rows if i in skip else c for i, c in enumerate(columns)]
    with pytest.raises(codec.CodecError):
        codec.decode(codec.encode([[1, 2, 3]])[:-3] + b"\0\0\0", 1)

    path = tmp_path / "bad.gpuwhy.db"
    writer = RecordingWriter(path)
    for i in range(3 * SLOT_NS // 10**8):
        writer.put(GpuSample(T0 + i * 10**8, 0, util_gpu_pct=i % 100))
    writer.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE gpu_blocks SET data = X'789c0300'")
    db.close()
    with Recording.open(path) as rec, pytest.raises(RecordingError, match="damaged"):
        rec.gpu_segments([T0 + 5 * S + 1, T0 + 170 * S + 3])
