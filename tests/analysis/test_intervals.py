"""Interval arithmetic the phase shares rest on."""

from __future__ import annotations

import random

from gpuwhy.analysis.intervals import IntervalSet, SortedRuns, clip, total_ns, union


def test_union_merges_overlapping_and_touching_and_drops_empty() -> None:
    assert union([(5, 8), (0, 2), (2, 3), (7, 10), (4, 4)]) == [(0, 3), (5, 10)]


def test_total_and_clip() -> None:
    spans = union([(0, 10), (20, 30)])
    assert total_ns(spans) == 20
    assert clip(spans, 5, 25) == [(5, 10), (20, 25)]


def test_interval_set_membership_is_half_open() -> None:
    window = IntervalSet([(10, 20), (30, 40)])
    assert 10 in window and 19 in window
    assert 20 not in window and 25 not in window and 9 not in window
    assert window.total_ns == 20
    assert not IntervalSet([])


def test_interval_set_clip_matches_the_linear_clip() -> None:
    spans = [(0, 10), (20, 30), (40, 50)]
    window = IntervalSet(spans)
    for start, end in [(5, 45), (10, 20), (-5, 100), (25, 26), (50, 60), (12, 18)]:
        assert window.clip(start, end) == clip(spans, start, end)


def test_the_overlap_of_two_interval_lists_matches_a_point_count() -> None:
    rng = random.Random(7)
    for _ in range(200):
        first = union((a, a + rng.randint(0, 9)) for a in rng.sample(range(100), 12))
        second = union((a, a + rng.randint(0, 9)) for a in rng.sample(range(100), 12))
        counted = sum(
            1
            for t in range(120)
            if any(s <= t < e for s, e in first) and any(s <= t < e for s, e in second)
        )
        assert SortedRuns.of(first).overlap_with_ns(SortedRuns.of(second)) == counted
        assert SortedRuns.of(second).overlap_with_ns(SortedRuns.of(first)) == counted


def test_the_longest_part_inside_a_window_matches_clipping_each_interval() -> None:
    rng = random.Random(11)
    for _ in range(300):
        runs = union((a, a + rng.randint(1, 12)) for a in rng.sample(range(100), 10))
        start = rng.randint(-5, 100)
        end = start + rng.randint(0, 60)
        expected = max((e - s for s, e in clip(runs, start, end)), default=0)
        assert SortedRuns.of(runs).longest_inside_ns(start, end) == expected
