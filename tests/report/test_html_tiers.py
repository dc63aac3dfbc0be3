"""The timeline's downsampled tiers: grid planning, exact merging, byte quantization, budgets.

Recordings here are CONSTRUCTED through the real RecordingWriter (tests/analysis/constructed.py):
their GPU samples stand in for NVML readings.
"""

from __future__ import annotations

import base64
import json
import math
import random
from pathlib import Path

from constructed import GPU_OK_ENV, H100, Run

from gpuwhy.analysis import diagnose
from gpuwhy.report.html.tiers import (
    FACTOR,
    MISSING,
    OVERVIEW_BUCKETS,
    QMAX,
    Buckets,
    Scale,
    add_coverage,
    add_coverages,
    fraction_tiers,
    plan_tiers,
    series_tiers,
    tier_bytes,
)
from gpuwhy.report.html.timeline import (
    GPU_METRICS,
    HOST_METRICS,
    _Collector,
    nice_ceiling,
    timeline_data,
)

S = 1_000_000_000
MS = 1_000_000


def _bytes(text: str) -> bytes:
    return base64.b64decode(text)


def test_short_run_keeps_every_sample_and_coarser_tiers_shrink_by_factor() -> None:
    plan = plan_tiers(0, 3600 * S, 100 * MS, full_series=50, mean_series=1, budget_bytes=3_800_000)
    assert plan.raw and plan.widths_ns[0] == 100 * MS
    assert plan.origin_ns == -50 * MS  # half a period early: jittered samples land mid-bucket
    assert all(b == a * FACTOR for a, b in zip(plan.widths_ns, plan.widths_ns[1:], strict=False))
    assert plan.counts[-1] <= OVERVIEW_BUCKETS < plan.counts[-2]
    assert not plan.aggregated(0) and plan.aggregated(1)


def test_long_run_gets_the_finest_whole_second_grid_that_fits_the_budget() -> None:
    budget = 3_800_000
    day = 86_400 * S
    plan = plan_tiers(
        7 * S + 30 * MS, 7 * S + day, 100 * MS, full_series=58, mean_series=1, budget_bytes=budget
    )
    width = plan.widths_ns[0]
    assert not plan.raw and width % S == 0 and plan.origin_ns % width == 0
    assert plan.origin_ns <= 7 * S + 30 * MS
    span = 7 * S + day - plan.origin_ns
    assert tier_bytes(span, width, raw=False, full_series=58, mean_series=1) <= budget
    # One second finer would not fit: the grid is as fine as the budget allows.
    assert tier_bytes(span, width - S, raw=False, full_series=58, mean_series=1) > budget


def test_a_slow_sampling_period_that_fits_stays_raw() -> None:
    plan = plan_tiers(0, 600 * S, 2 * S, full_series=8, mean_series=1, budget_bytes=10**6)
    assert plan.raw and plan.widths_ns[0] == 2 * S and plan.origin_ns == -S


def test_buckets_merge_exactly() -> None:
    rng = random.Random(3)
    fine = Buckets(100)
    values: dict[int, list[float]] = {}
    for _ in range(1000):
        index = rng.randrange(100)
        if index % 13 == 0:
            continue  # some empty buckets
        value = rng.uniform(-5, 100)
        fine.add(index, value)
        values.setdefault(index // FACTOR, []).append(value)
    coarse = fine.coarser()
    assert len(coarse.counts) == math.ceil(100 / FACTOR)
    for index, seen in values.items():
        assert coarse.counts[index] == len(seen)
        assert math.isclose(coarse.sums[index], sum(seen))
        assert coarse.mins[index] == min(seen) and coarse.maxs[index] == max(seen)
    assert fine.observed_range() == (
        min(min(v) for v in values.values()),
        max(max(v) for v in values.values()),
    )
    assert Buckets(5).observed_range() is None


def test_scale_is_exact_for_percentages_and_constants_and_marks_gaps() -> None:
    util = Scale.for_range(0, 100, integral=True)
    assert (util.low, util.step, util.qmax) == (0, 1.0, 100)
    assert util.quantize([0, 37, 100, 55], [1, 1, 1, 0]) == bytes([0, 37, 100, MISSING])
    constant = Scale.for_range(3 * 2**30, 3 * 2**30, integral=True)
    assert constant.quantize([3 * 2**30], [1]) == bytes([0])
    assert constant.low == 3 * 2**30
    power = Scale.for_range(200_000, 500_000, integral=True)  # mW: 254 steps of ~1.2 W
    encoded = power.quantize([200_000, 350_000, 500_000], [1, 1, 1])
    decoded = [power.low + q * power.step for q in encoded]
    assert decoded[0] == 200_000 and math.isclose(decoded[2], 500_000)  # ends exact
    assert abs(decoded[1] - 350_000) <= power.step / 2


def test_series_tiers_decode_to_the_bucket_means_within_half_a_step() -> None:
    rng = random.Random(5)
    plan = plan_tiers(0, 10 * S, 100 * MS, full_series=1, mean_series=0, budget_bytes=10**6)
    buckets = Buckets(plan.counts[0])
    truth = [rng.uniform(1e9, 5e9) for _ in range(plan.counts[0])]
    for index, value in enumerate(truth):
        buckets.add(index, value)
    low, high = buckets.observed_range() or (0, 0)
    scale = Scale.for_range(low, high, integral=False)
    tiers = series_tiers(buckets, plan, scale)
    assert set(tiers[0]) == {"mean"}  # raw tier: one value per bucket
    decoded = [scale.low + q * scale.step for q in _bytes(tiers[0]["mean"])]
    assert all(abs(d - t) <= scale.step / 2 + 1e-6 for d, t in zip(decoded, truth, strict=True))


def test_wait_coverage_is_the_share_of_each_bucket() -> None:
    plan = plan_tiers(0, 2 * S, 100 * MS, full_series=1, mean_series=1, budget_bytes=10**6)
    covered = [0.0] * plan.counts[0]
    add_coverage(covered, plan, 0, 25 * MS)  # half of bucket 0 ([-50, 50) ms) after its middle
    add_coverage(covered, plan, 150 * MS, 350 * MS)  # buckets 2 and 3 whole
    tiers = fraction_tiers(covered, plan, divisor=1)
    first = _bytes(tiers[0]["mean"])
    assert first[0] == round(0.25 * QMAX)  # 25 ms of a 100 ms bucket
    assert first[1] == 0 and first[2] == QMAX and first[3] == QMAX
    two_processes = _bytes(fraction_tiers(covered, plan, divisor=2)[0]["mean"])
    assert two_processes[2] == round(QMAX / 2)


def test_nice_ceiling() -> None:
    assert [nice_ceiling(v) for v in (0, 0.7, 1, 1.2, 550, 800, 801, 25_000)] == [
        1.0,
        0.8,
        1.0,
        1.5,
        600.0,
        800.0,
        1000.0,
        30_000.0,
    ]


def _constructed(path: Path, seconds: float) -> Run:
    run = Run(path, duration_s=seconds, devices=[H100], environment=GPU_OK_ENV)
    run.phase("train", 1, seconds - 1)
    rng = random.Random(11)
    t = 0.0
    while t < seconds:
        util = rng.randrange(101)
        run.gpu(
            0,
            t,
            t + 0.05,
            util_gpu_pct=util,
            memory_used_bytes=(20 << 30) + util * 2**20,
            power_mw=100_000 + util * 3000,
            pcie_rx_kbps=rng.randrange(10**6),
        )
        t += 0.1
    run.host(0, seconds, every_s=0.1, cpu_system_pct=50.0, job_cpu_pct=120.0)
    return run


def test_stored_tiers_and_raw_samples_fill_the_same_buckets(tmp_path: Path) -> None:
    recording = _constructed(tmp_path / "r.db", 120).close()
    plan = plan_tiers(0, 120 * S, 100 * MS, full_series=6, mean_series=1, budget_bytes=2_000)
    width = plan.widths_ns[0]
    assert width % S == 0 and width > S  # a whole-second grid: the stored-tier path
    from_tiers, from_samples = _Collector(plan), _Collector(plan)
    end = plan.origin_ns + width * plan.counts[0]
    from_tiers.feed_tiers(
        recording.gpu_tiers(width, start_ns=plan.origin_ns, end_ns=end),
        lambda b: b.device,
        GPU_METRICS,
    )
    from_tiers.feed_tiers(
        recording.host_tiers(width, start_ns=plan.origin_ns, end_ns=end),
        lambda b: "host",
        HOST_METRICS,
    )
    from_samples.feed_samples(recording.gpu_samples(), lambda s: s.device, GPU_METRICS)
    from_samples.feed_samples(recording.host_samples(), lambda s: "host", HOST_METRICS)
    from_columns = _Collector(plan)  # the stored tiers as columns, a block at a time
    fields = [m.field for m in GPU_METRICS]
    from_columns.feed_tier_columns(
        recording.gpu_tier_columns(width, plan.origin_ns, end, metrics=fields),
        lambda part: part.device,
        GPU_METRICS,
    )
    from_columns.feed_tier_columns(
        recording.host_tier_columns(
            width, plan.origin_ns, end, metrics=[m.field for m in HOST_METRICS]
        ),
        lambda part: "host",
        HOST_METRICS,
    )
    assert (
        set(from_tiers.series)
        == set(from_samples.series)
        == set(from_columns.series)
        == {
            (0, "util_gpu_pct"),
            (0, "memory_used_bytes"),
            (0, "power_mw"),
            (0, "pcie_rx_kbps"),
            ("host", "cpu_system_pct"),
            ("host", "job_cpu_pct"),
        }
    )
    for key, expected in from_samples.series.items():
        for got in (from_tiers.series[key], from_columns.series[key]):
            assert list(got.counts) == list(expected.counts), key
            assert all(math.isclose(a, b) for a, b in zip(got.sums, expected.sums, strict=True)), (
                key
            )
            assert list(got.mins) == list(expected.mins)
            assert list(got.maxs) == list(expected.maxs)
        assert list(from_columns.series[key].sums) == list(from_tiers.series[key].sums)
    recording.close()


def test_timeline_stays_within_its_budget(tmp_path: Path) -> None:
    recording = _constructed(tmp_path / "r.db", 300).close()
    diagnosis = diagnose(recording)
    sizes = {}
    for budget in (68_000, 76_000, 4_000_000):
        data = timeline_data(diagnosis, recording, budget_bytes=budget)
        sizes[budget] = data["tiers"][0]["bucket_s"]
        assert len(json.dumps(data, separators=(",", ":"))) <= budget, budget
    assert sizes[68_000] > sizes[76_000] > sizes[4_000_000] == 0.1  # finer with more room
    assert data["raw"]  # the big budget keeps every sample
    recording.close()


def test_buckets_take_columns_as_they_take_summaries() -> None:
    rng = random.Random(8)
    for _ in range(50):
        by_one, by_columns = Buckets(40), Buckets(40)
        for _ in range(rng.randrange(1, 4)):  # runs of buckets, some of them repeated
            first = rng.randrange(-3, 38)
            size = rng.randrange(1, 12)
            indices = list(range(first, first + size))
            if rng.random() < 0.3:  # a gap
                indices = indices[::2]
            counts = [rng.choice((0, rng.randrange(1, 9))) for _ in indices]
            totals = [rng.uniform(0, 100) * c for c in counts]
            lows = [rng.uniform(0, 50) if c else None for c in counts]
            highs = [low + rng.uniform(0, 50) if low is not None else None for low in lows]
            by_columns.add_columns(indices, counts, totals, lows, highs)
            for index, count, total, low, high in zip(
                indices, counts, totals, lows, highs, strict=True
            ):
                if count and 0 <= index < 40:
                    by_one.add_summary(index, count, total, low, high)
        assert list(by_columns.counts) == list(by_one.counts)
        assert list(by_columns.sums) == list(by_one.sums)
        assert list(by_columns.mins) == list(by_one.mins)
        assert list(by_columns.maxs) == list(by_one.maxs)


def test_quantize_and_coarser_tiers_match_their_definitions() -> None:
    rng = random.Random(4)
    for _ in range(30):
        n = rng.randrange(1, 300)
        counts = [rng.choice((0, 1, 3)) for _ in range(n)]
        low = rng.uniform(-10, 10)
        values = [
            rng.uniform(low, low + 50) if c else rng.choice((0.0, math.inf, -math.inf))
            for c in counts
        ]
        scale = Scale.for_range(low, low + 50, integral=False)
        factor = 1.0 / scale.step  # byte = round((value - low) / step), held to 0..qmax
        want = bytes(
            MISSING if not c else max(0, min(scale.qmax, round((v - low) * factor)))
            for v, c in zip(values, counts, strict=True)
        )
        assert scale.quantize(values, counts) == want
        buckets = Buckets(n)
        for index, (value, count) in enumerate(zip(values, counts, strict=True)):
            if count:
                buckets.add_summary(index, count, value * count, value - 1, value + 1)
        coarse = buckets.coarser()
        for index in range(len(coarse.counts)):
            part = slice(index * FACTOR, (index + 1) * FACTOR)
            assert coarse.counts[index] == sum(buckets.counts[part])
            assert coarse.sums[index] == sum(buckets.sums[part])
            assert coarse.mins[index] == min(buckets.mins[part])
            assert coarse.maxs[index] == max(buckets.maxs[part])


def test_coverage_of_many_spans_adds_up_as_span_by_span() -> None:
    rng = random.Random(6)
    plan = plan_tiers(0, 20 * S, 100 * MS, full_series=1, mean_series=1, budget_bytes=10**7)
    for _ in range(40):
        starts, durations = [], []
        t = rng.randrange(-2 * S, 2 * S)
        for _ in range(rng.randrange(0, 60)):
            t += rng.randrange(0, 300 * MS)
            length = rng.choice((0, rng.randrange(1, 50 * MS), rng.randrange(1, 2 * S)))
            starts.append(t)
            durations.append(length)
            if rng.random() < 0.9:
                t += length  # usually apart; now and then overlapping the next
        one_by_one = [0.0] * plan.counts[0]
        for start, length in zip(starts, durations, strict=True):
            add_coverage(one_by_one, plan, start, start + length)
        together = [0.0] * plan.counts[0]
        add_coverages(together, plan, starts, durations)
        assert together == one_by_one
