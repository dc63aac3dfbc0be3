"""Step-time percentiles from one sort (spanruns.py): those of a part of the steps, read off the
sorted whole less the rest, equal the part's own."""

from __future__ import annotations

import random

import pytest

from gpuwhy.analysis.spanruns import Runs, rank_percentiles, sorted_durations, step_percentiles

QUANTILES = (0.0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)


def _runs(durations: list[int]) -> Runs:
    runs = Runs()
    t = 0
    for duration in durations:
        runs.add(t, t + duration, 1)
        t += duration + 7
    return runs


@pytest.mark.parametrize("seed", range(40))
def test_percentiles_of_what_is_left_equal_those_of_the_part_itself(seed: int) -> None:
    rng = random.Random(seed)
    # Few distinct values: ties on both sides of every rank.
    everything = [
        rng.choice((3, 5, 5, 8, 13, 13, 13, 21)) * 1_000 for _ in range(rng.randint(1, 60))
    ]
    kept_at = sorted(rng.sample(range(len(everything)), rng.randint(0, len(everything))))
    kept = [everything[i] for i in kept_at]
    dropped = sorted(d for i, d in enumerate(everything) if i not in set(kept_at))
    got = rank_percentiles(sorted(everything), QUANTILES, dropped)
    want = step_percentiles([_runs(kept)], QUANTILES) if kept else [None] * len(QUANTILES)
    assert got == want


def test_nothing_dropped_and_everything_dropped() -> None:
    durations = [4_000, 1_000, 9_000, 1_000]
    assert rank_percentiles(sorted(durations), (0.5, 1.0)) == step_percentiles(
        [_runs(durations)], (0.5, 1.0)
    )
    assert rank_percentiles(sorted(durations), (0.5,), sorted(durations)) == [None]
    assert rank_percentiles([], (0.5,)) == [None]


def test_spans_of_several_steps_are_left_to_the_weighted_percentiles() -> None:
    runs = Runs()
    runs.add(0, 4_000, 2)  # two steps of 2 µs each
    runs.add(5_000, 6_000, 1)
    assert sorted_durations([runs]) is None
    assert list(sorted_durations([_runs([3, 1, 2])]) or []) == [1, 2, 3]
    assert step_percentiles([runs], (0.5,)) == [2e-6]
