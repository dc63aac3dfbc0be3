"""The spans of one phase, kept as arrays, and the step statistics computed on them.

A day-long run reports a million steps and as many input waits; an object per span costs hundreds
of MB and the per-span loops minutes. Here each (phase, process, kind) keeps its spans as three
integer arrays (start, end, steps covered: 24 bytes a span), filled from `Span` records or
straight from a recording's stored columns, and every statistic is a sort, a C-speed pass
(sum, map, bisect) or one linear pass: seconds for a day, the same numbers as span by span.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import operator
from array import array
from collections.abc import Iterable, Sequence

from gpuwhy.analysis.intervals import Interval, SortedRuns, disjoint
from gpuwhy.model import NS_PER_S


class Runs:
    """Spans of one kind of one process in one phase: start, end and steps covered, as arrays
    in the order they came (`ordered()` sorts them by start). `counts` stays None while every
    span covers one step (the usual case: nothing to store)."""

    __slots__ = ("_sorted", "counts", "ends", "starts")

    def __init__(self) -> None:
        self.starts = array("q")
        self.ends = array("q")
        self.counts: array[int] | None = None
        self._sorted = False

    def __len__(self) -> int:
        return len(self.starts)

    def add(self, start_ns: int, end_ns: int, steps: int) -> None:
        if steps != 1 and self.counts is None:
            self.counts = array("q", [1]) * len(self.starts)
        self.starts.append(start_ns)
        self.ends.append(end_ns)
        if self.counts is not None:
            self.counts.append(steps)
        self._sorted = False

    def extend(self, starts: Sequence[int], ends: Sequence[int], counts: Sequence[int]) -> None:
        if self.counts is None and (min(counts, default=1) != 1 or max(counts, default=1) != 1):
            self.counts = array("q", [1]) * len(self.starts)
        self.starts.extend(starts)
        self.ends.extend(ends)
        if self.counts is not None:
            self.counts.extend(counts)
        self._sorted = False

    def ordered(self) -> Runs:
        """These spans sorted by start (stable: spans starting together keep their order)."""
        starts = self.starts
        if self._sorted or all(map(operator.le, starts, itertools.islice(starts, 1, None))):
            self._sorted = True
            return self
        order = sorted(range(len(starts)), key=starts.__getitem__)
        runs = Runs()
        runs.starts = array("q", (starts[i] for i in order))
        runs.ends = array("q", (self.ends[i] for i in order))
        if self.counts is not None:
            runs.counts = array("q", (self.counts[i] for i in order))
        runs._sorted = True
        return runs

    def weights(self) -> Iterable[int]:
        """Steps each span stands for: N for a span of N steps, 1 for one that says 0."""
        if self.counts is None:
            return itertools.repeat(1, len(self.starts))
        return map(max, self.counts, itertools.repeat(1))

    def step_count(self) -> int:
        """Steps covered: a span of N steps counts N, a span that says 0 counts 1."""
        if self.counts is None:
            return len(self.starts)
        return sum(self.weights())


def step_percentiles(
    runs: Iterable[Runs],
    quantiles: Sequence[float],
) -> list[float | None]:
    """Nearest-rank percentiles of the time per step, in seconds, over every span of `runs`
    (a span of N steps weighs N at its average step time) — `phases.weighted_percentile`'s
    result, from one sort of the durations instead of a tuple per span."""
    runs = [r for r in runs if len(r)]
    if not runs:
        return [None] * len(quantiles)
    durations = sorted_durations(runs)
    if durations is not None:
        return rank_percentiles(durations, quantiles)
    pairs = sorted(
        (duration / weight / NS_PER_S, weight)
        for r in runs
        for duration, weight in zip(map(operator.sub, r.ends, r.starts), r.weights(), strict=True)
    )
    weights = list(itertools.accumulate(weight for _, weight in pairs))
    result: list[float | None] = []
    for q in quantiles:
        index = bisect.bisect_left(weights, q * weights[-1])
        result.append(pairs[min(index, len(pairs) - 1)][0])
    return result


def sorted_durations(runs: Iterable[Runs]) -> Sequence[int] | None:
    """Every span's duration (ns), sorted; None where a span covers several steps (whose time
    per step weighs as many: `step_percentiles`)."""
    runs = [r for r in runs if len(r)]
    if any(r.counts is not None for r in runs):
        return None
    durations = sorted(
        itertools.chain.from_iterable(map(operator.sub, r.ends, r.starts) for r in runs)
    )
    return array("q", durations)  # 8 bytes a step while they are kept, not ~36


def rank_percentiles(
    durations: Sequence[int], quantiles: Sequence[float], dropped: Sequence[int] = ()
) -> list[float | None]:
    """Nearest-rank percentiles, in seconds, of sorted one-step `durations` less `dropped` (a
    sorted part of them): `step_percentiles` of what is left, without sorting it again (a phase's
    steps are sorted once, for their median and for their steady ones' percentiles: ~0.2 s a
    sort for a day's million steps)."""
    total = len(durations) - len(dropped)
    if total <= 0:
        return [None] * len(quantiles)
    result: list[float | None] = []
    for q in quantiles:
        # The first rank whose running weight reaches q × total, as weighted_percentile walks:
        # the least duration with `rank` of the rest at or under it (a count that only grows).
        rank = min(max(math.ceil(q * total), 1), total)
        low, high = 0, len(durations) - 1
        while low < high:
            middle = (low + high) // 2
            value = durations[middle]
            left = bisect.bisect_right(durations, value) - bisect.bisect_right(dropped, value)
            if left >= rank:
                high = middle
            else:
                low = middle + 1
        result.append(durations[low] / 1 / NS_PER_S)
    return result


def wait_runs(runs: Runs) -> SortedRuns:
    """A process's input waits as disjoint intervals (overlapping ones merged). Waits that
    already follow each other without overlap (the usual case) are taken as they are: that
    check also proves them sorted, so no sort is needed."""
    if disjoint(runs.starts, runs.ends):
        return SortedRuns(runs.starts, runs.ends, checked=True)
    ordered = runs.ordered()
    return SortedRuns(ordered.starts, ordered.ends)


def waited_ns(waits: SortedRuns, extent: Sequence[Interval]) -> int:
    """Wait time inside the phase's intervals."""
    return sum(waits.overlap_ns(start, end) for start, end in extent)


def step_gaps_ns(steps: Runs, waits: SortedRuns, extent: Sequence[Interval]) -> int:
    """Time between consecutive steps of one process that is not data wait, inside the phase.

    A gap counts only where it lies wholly inside one of the phase's intervals (one that spans
    a phase boundary, e.g. validation between epochs, is not host work between steps).
    """
    ordered = steps.ordered()
    starts, ends = ordered.starts, ordered.ends
    if len(starts) < 2:
        return 0
    following = itertools.islice(starts, 1, None)
    if not all(map(operator.le, ends, following)) or not _apart(waits, starts, ends):
        return _step_gaps_slow(starts, ends, waits, extent)
    # Steps that do not overlap each other or the waits (the usual timeline): the gaps fill
    # the steps' hull around them, so the sums come from whole-array sums and a few searches.
    gap_total = sum(itertools.islice(starts, 1, None)) - sum(itertools.islice(ends, len(ends) - 1))
    waited = waits.overlap_ns(starts[0], ends[-1])
    for index in _gaps_outside(starts, ends, extent):
        gap_total -= starts[index + 1] - ends[index]
        waited -= waits.overlap_ns(ends[index], starts[index + 1])
    return max(gap_total - waited, 0)


def _apart(waits: SortedRuns, starts: Sequence[int], ends: Sequence[int]) -> bool:
    """Whether no wait overlaps a step (both disjoint families, sorted)."""
    if not waits.starts:
        return True
    wait_starts, wait_ends = waits.starts, waits.ends
    # The usual timeline alternates: each step's wait right before it (or right after it).
    if (
        len(wait_starts) == len(starts)
        and all(map(operator.le, wait_ends, starts))
        and all(map(operator.le, ends, itertools.islice(wait_starts, 1, None)))
    ):
        return True
    if (
        len(wait_starts) in (len(starts), len(starts) - 1)
        and all(map(operator.le, ends, wait_starts))
        and all(map(operator.le, wait_ends, itertools.islice(starts, 1, None)))
    ):
        return True
    # Otherwise, merged: the i-th smallest end never passes the next smallest start.
    all_starts = sorted(itertools.chain(wait_starts, starts))
    all_ends = sorted(itertools.chain(wait_ends, ends))
    return all(map(operator.le, all_ends, itertools.islice(all_starts, 1, None)))


def _gaps_outside(
    starts: Sequence[int],
    ends: Sequence[int],
    extent: Sequence[Interval],
) -> set[int]:
    """Indices k of the gaps [ends[k], starts[k + 1]) that reach outside the phase's intervals:
    those meeting a hole between them or the time before or after them."""
    if not extent:
        return set(range(len(starts) - 1))
    holes = [
        (-(1 << 63), extent[0][0]),
        *((a[1], b[0]) for a, b in itertools.pairwise(extent)),
        (extent[-1][1], 1 << 63),
    ]
    lengths = len(starts) - 1
    outside: set[int] = set()
    for low, high in holes:
        # Gaps are disjoint and sorted: those with end > low and start < high meet the hole.
        first = bisect.bisect_right(starts, low, 1) - 1  # gap k ends at starts[k + 1]
        stop = bisect.bisect_left(ends, high, 0, lengths)
        outside.update(
            k
            for k in range(max(first, 0), stop)
            if starts[k + 1] > ends[k] and starts[k + 1] > low and ends[k] < high
        )
    return outside


def _step_gaps_slow(
    starts: Sequence[int], ends: Sequence[int], waits: SortedRuns, extent: Sequence[Interval]
) -> int:
    """The general case (steps overlapping each other or a wait): gap by gap."""
    ext_starts = [start for start, _ in extent]
    ext_ends = [end for _, end in extent]
    gap_starts: list[int] = []
    gap_ends: list[int] = []
    for prev_end, next_start in zip(ends, itertools.islice(starts, 1, None), strict=False):
        if next_start > prev_end:  # (zip stops at the last step: it has no gap after it)
            gap_starts.append(prev_end)
            gap_ends.append(next_start)
    homes = map(functools.partial(bisect.bisect_right, ext_starts), gap_starts)
    inside_starts: list[int] = []
    inside_ends: list[int] = []
    for start, end, home in zip(gap_starts, gap_ends, homes, strict=True):
        if home and ext_ends[home - 1] >= end:  # a merged interval: whole gap or nothing
            inside_starts.append(start)
            inside_ends.append(end)
    gaps = SortedRuns(inside_starts, inside_ends)
    return max(gaps.total_ns - gaps.overlap_with_ns(waits), 0)


def resume_ns(
    intervals: Sequence[Interval],
    step_starts: Sequence[Sequence[int]],
) -> list[int | None]:
    """For each interval, ns from its end to the first step (of any phase) starting at or after
    it, or None if none does. `step_starts`: sorted start arrays."""
    result: list[int | None] = []
    for _, end in intervals:
        firsts = [
            starts[i]
            for starts in step_starts
            if (i := bisect.bisect_left(starts, end)) < len(starts)
        ]
        result.append(min(firsts) - end if firsts else None)
    return result
