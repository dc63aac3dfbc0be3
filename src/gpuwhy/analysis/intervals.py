"""Half-open time intervals ``(start_ns, end_ns)``: union, total length, overlap, membership.

Phases come as many spans (one per epoch, nested user phases, overlapping ranks); every share the
report prints is computed on the union of those spans so that nothing is counted twice.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import operator
from collections.abc import Iterable, Sequence

Interval = tuple[int, int]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering exactly the given ones (empty ones dropped)."""
    merged: list[Interval] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def total_ns(disjoint: Sequence[Interval]) -> int:
    """Summed length of disjoint intervals."""
    return sum(end - start for start, end in disjoint)


def clip(disjoint: Sequence[Interval], start_ns: int, end_ns: int) -> list[Interval]:
    """The parts of disjoint intervals inside ``[start_ns, end_ns)``."""
    clipped = []
    for start, end in disjoint:
        lo, hi = max(start, start_ns), min(end, end_ns)
        if hi > lo:
            clipped.append((lo, hi))
    return clipped


class IntervalSet:
    """Disjoint sorted intervals with O(log n) membership: is a sample inside this phase?"""

    __slots__ = ("_ends", "_starts", "intervals")

    def __init__(self, intervals: Iterable[Interval]) -> None:
        self.intervals = union(intervals)
        self._starts = [start for start, _ in self.intervals]
        self._ends = [end for _, end in self.intervals]

    def __contains__(self, t_ns: object) -> bool:
        if not isinstance(t_ns, int):
            return False
        k = bisect.bisect_right(self._starts, t_ns) - 1
        return k >= 0 and t_ns < self._ends[k]

    def clip(self, start_ns: int, end_ns: int) -> list[Interval]:
        """The parts inside ``[start_ns, end_ns)``, found by binary search (O(log n + k))."""
        k = bisect.bisect_right(self._ends, start_ns)
        clipped = []
        while k < len(self.intervals) and self._starts[k] < end_ns:
            lo, hi = max(self._starts[k], start_ns), min(self._ends[k], end_ns)
            if hi > lo:
                clipped.append((lo, hi))
            k += 1
        return clipped

    def __bool__(self) -> bool:
        return bool(self.intervals)

    @property
    def total_ns(self) -> int:
        return total_ns(self.intervals)


class SortedRuns:
    """Disjoint intervals as sorted start and end arrays with running totals: the length of
    their overlap with any ``[a, b)`` in O(log n), for a million data-wait spans without an
    object per span.

    Touching or empty intervals may stay unmerged (lengths are what is summed).
    """

    __slots__ = ("_prefix", "ends", "starts")

    def __init__(
        self, starts: Sequence[int], ends: Sequence[int], *, checked: bool = False
    ) -> None:
        """``starts``/``ends`` of intervals sorted by start; overlapping ones are merged.
        `checked`: the caller knows them disjoint (`disjoint`), no check again."""
        if not checked and not disjoint(starts, ends):
            merged = union(zip(starts, ends, strict=True))
            starts, ends = [s for s, _ in merged], [e for _, e in merged]
        self.starts = starts
        self.ends = ends
        self._prefix: list[int] = [0, *itertools.accumulate(map(operator.sub, ends, starts))]

    @classmethod
    def of(cls, intervals: Sequence[Interval]) -> SortedRuns:
        """From (start, end) pairs sorted by start (overlapping ones are merged)."""
        return cls([start for start, _ in intervals], [end for _, end in intervals])

    @property
    def total_ns(self) -> int:
        return self._prefix[-1]

    def overlap_ns(self, start_ns: int, end_ns: int) -> int:
        """Length of these intervals inside ``[start_ns, end_ns)``."""
        first = bisect.bisect_right(self.ends, start_ns)  # the first one ending after start
        stop = bisect.bisect_left(self.starts, end_ns)  # the first one starting at/after end
        if first >= stop:
            return 0
        inside = self._prefix[stop] - self._prefix[first]
        head, tail = start_ns - self.starts[first], self.ends[stop - 1] - end_ns
        return inside - (head if head > 0 else 0) - (tail if tail > 0 else 0)

    def longest_inside_ns(self, start_ns: int, end_ns: int) -> int:
        """The longest stretch these intervals cover without a break (touching ones join)
        inside ``[start_ns, end_ns)``."""
        first = bisect.bisect_right(self.ends, start_ns)
        stop = bisect.bisect_left(self.starts, end_ns)
        if first >= stop:
            return 0
        starts, ends = self.starts[first:stop], self.ends[first:stop]
        if any(map(operator.eq, ends[:-1], starts[1:])):
            merged = union(zip(starts, ends, strict=True))
            starts, ends = [s for s, _ in merged], [e for _, e in merged]
        lengths: list[int] = list(map(operator.sub, ends, starts))
        lengths[0] = min(ends[0], end_ns) - max(starts[0], start_ns)
        lengths[-1] = min(ends[-1], end_ns) - max(starts[-1], start_ns)
        return max(lengths)

    def overlap_with_ns(self, other: SortedRuns) -> int:
        """Length of the overlap of two sets of disjoint intervals (C-speed searches, then one
        pass over ``other``)."""
        if not self.starts or not other.starts:
            return 0
        firsts = map(functools.partial(bisect.bisect_right, self.ends), other.starts)
        stops = map(functools.partial(bisect.bisect_left, self.starts), other.ends)
        prefix, starts, ends = self._prefix, self.starts, self.ends
        total = 0
        for start, end, first, stop in zip(
            other.starts, other.ends, firsts, stops, strict=False
        ):  # the searches are lazy maps
            if first < stop:
                head, tail = start - starts[first], ends[stop - 1] - end
                total += (
                    prefix[stop]
                    - prefix[first]
                    - (head if head > 0 else 0)
                    - (tail if tail > 0 else 0)
                )
        return total


def disjoint(starts: Sequence[int], ends: Sequence[int]) -> bool:
    """Sorted by start, each ending no later than the next starts, none reversed (C-speed)."""
    following = itertools.islice(starts, 1, None)
    return (
        all(map(operator.le, ends, following))
        and all(map(operator.le, starts, ends))
        and len(starts) == len(ends)
    )


def subtract(base: list[Interval], holes: Sequence[Interval]) -> list[Interval]:
    """Parts of ``base`` not covered by the disjoint sorted ``holes``."""
    result: list[Interval] = []
    for start, end in base:
        cursor = start
        for hole_start, hole_end in holes:
            if hole_end <= cursor or hole_start >= end:
                continue
            if hole_start > cursor:
                result.append((cursor, hole_start))
            cursor = max(cursor, hole_end)
        if cursor < end:
            result.append((cursor, end))
    return result
