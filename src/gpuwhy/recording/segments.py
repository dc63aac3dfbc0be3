"""Exact summaries of many adjacent segments of a stream in one pass.

An analysis that lines samples up with phases cuts the run at every phase boundary (a day of
epochs: a thousand or two cuts) and needs, per segment and GPU, what `Recording.gpu_summary`
gives for one window. Asking for each segment separately reads the raw edges of each (tens of ms
apiece); streaming every sample takes minutes. Here the run is read once: the coarsest stored
tier (1 min) for every tier bucket that no bound falls inside, and the raw columns of the
buckets a bound cuts, sliced per segment without a row object. The sums are exact integers, so
the result equals `summary` of each segment.

Cost, a day of 8 GPUs at 10 Hz cut by 1,900 bounds that fall in ~500 distinct minutes: the
1-min tier (11,520 small blocks) plus 4,000 raw blocks, a few seconds; `metrics` narrows what
is decoded.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Collection, Container, Iterable, Iterator, Sequence
from typing import Any, Protocol

from gpuwhy.model import NS_PER_S
from gpuwhy.recording.streams import SLOT_NS, TIER_WIDTHS_S, Column, StreamSpec
from gpuwhy.recording.tiers import TierBucket, range_columns, tier_layout, to_bucket

Numbers = Sequence[Any]  # a tier row after its bucket start and keys


class StoredReads(Protocol):
    """The two reads a segment summary needs from an open recording (tierqueries.TierQueries has
    them; declared here so that this module depends on no reader)."""

    def stored(
        self,
        spec: StreamSpec,
        width_s: int,
        start_ns: int | None,
        end_ns: int | None,
        device: int | None,
        skip_slots: Container[int] = (),
    ) -> Iterable[tuple[Any, ...]]: ...

    def columns(
        self,
        spec: StreamSpec,
        start_ns: int,
        end_ns: int,
        device: int | None,
        skip: Container[str] = (),
    ) -> Iterator[tuple[tuple[Any, ...], list[Column]]]: ...


def summarise(
    reads: StoredReads,
    spec: StreamSpec,
    bounds: Sequence[int],
    device: int | None,
    metrics: Collection[str] | None = None,
) -> list[dict[int | None, TierBucket]]:
    """Per segment `[bounds[i], bounds[i + 1])` (bounds strictly increasing), per key, one
    bucket holding exactly the samples in it. With `metrics` (tier metric names), only those
    are summarised; the others read as absent in every bucket."""
    count = len(bounds) - 1
    if count < 1:
        return []
    if any(b <= a for a, b in itertools.pairwise(bounds)):
        raise ValueError("segment bounds must be strictly increasing")
    held: list[dict[tuple[Any, ...], list[Numbers]]] = [{} for _ in range(count)]
    width_s = max(TIER_WIDTHS_S)
    unit = width_s * NS_PER_S
    cut = sorted({b // unit for b in bounds if b % unit})
    cut_set = set(cut)
    first, last = bounds[0], bounds[-1]
    keys = len(spec.keys)
    # Tier buckets of the cut units are not read (a unit is one storage slot: skipped whole).
    skip_slots = cut_set if unit == SLOT_NS else ()
    for row in reads.stored(spec, width_s, first, last, device, skip_slots):
        if row[0] // unit in cut_set:
            continue  # counted from the raw rows below
        segment = held[bisect.bisect_right(bounds, row[0]) - 1]
        segment.setdefault(row[1 : 1 + keys], []).append(row[1 + keys :])
    skip = (
        ()
        if metrics is None
        else [m for m in spec.tier_metrics if m not in metrics and m in spec.full]
    )
    unread = (
        set()
        if metrics is None
        else {index for index, m in enumerate(spec.tier_metrics) if m not in metrics}
    )
    for low, high in _runs(cut, unit):
        low, high = max(low, first), min(high, last)
        for key, full in reads.columns(spec, low, high, device, skip):
            ranges = _row_ranges(full[0], bounds, low, high)
            if not ranges:
                continue
            columns = range_columns(spec, full, [rows for _, rows in ranges], unread)
            for (index, _), numbers in zip(ranges, zip(*columns, strict=True), strict=True):
                held[index].setdefault(key, []).append(numbers)
    dropped = _dropped_slots(spec, metrics)
    result: list[dict[int | None, TierBucket]] = []
    for index, found in enumerate(held):
        width = bounds[index + 1] - bounds[index]
        buckets = {}
        for key in sorted(found, key=_key_order):
            summed = merged(spec, found[key])
            for slot, empty in dropped:
                summed[slot] = empty
            bucket = to_bucket(spec, (bounds[index], *key, *summed), width)
            buckets[bucket.device] = bucket
        result.append(buckets)
    return result


def merged(spec: StreamSpec, rows: Sequence[Numbers]) -> list[Any]:
    """Tier rows of one key summed exactly into one: counts and sums added, min of the minima,
    max of the maxima, reason-bit counts added (column by column, at C speed)."""
    if len(rows) == 1:
        return list(rows[0])
    metrics, numbers = tier_layout(spec)
    columns = list(zip(*rows, strict=True))
    out: list[Any] = [sum(columns[0])]
    for m in range(metrics):
        base = 1 + 4 * m
        lows = [v for v in columns[base + 2] if v is not None]
        highs = [v for v in columns[base + 3] if v is not None]
        out += [
            sum(columns[base]),
            sum(columns[base + 1]),
            min(lows) if lows else None,
            max(highs) if highs else None,
        ]
    out += [sum(column) for column in columns[1 + 4 * metrics : numbers]]
    return out


def _dropped_slots(spec: StreamSpec, metrics: Collection[str] | None) -> list[tuple[int, Any]]:
    """(position in the numbers, empty value) of what is not asked for: 4 per metric, and the
    reason-bit counts if the bitmask is not."""
    if metrics is None:
        return []
    count, numbers = tier_layout(spec)
    slots: list[tuple[int, Any]] = []
    for m, name in enumerate(spec.tier_metrics):
        if name not in metrics:
            base = 1 + 4 * m
            slots += [(base, 0), (base + 1, 0), (base + 2, None), (base + 3, None)]
    if spec.reason_field and spec.reason_field not in metrics:
        slots += [(slot, 0) for slot in range(1 + 4 * count, numbers)]
    return slots


def _key_order(key: tuple[Any, ...]) -> tuple[int, ...]:
    return tuple(-1 if v is None else v for v in key)


def _runs(units: Iterable[int], unit_ns: int) -> Iterator[tuple[int, int]]:
    """[start, end) in ns of each run of consecutive unit numbers."""
    for _, run in itertools.groupby(enumerate(units), key=lambda pair: pair[1] - pair[0]):
        numbers = [number for _, number in run]
        yield numbers[0] * unit_ns, (numbers[-1] + 1) * unit_ns


def _row_ranges(
    times: Column,
    bounds: Sequence[int],
    low: int,
    high: int,
) -> list[tuple[int, tuple[int, int]]]:
    """(segment, [a, b)) of the rows of sorted `times` inside [low, high), per segment;
    `low`/`high` lie within the bounds."""
    stamps: Sequence[int] = times  # type: ignore[assignment]  # time is never NULL
    begin = bisect.bisect_left(stamps, low)
    stop = bisect.bisect_left(stamps, high)
    if begin >= stop:
        return []
    segment = bisect.bisect_right(bounds, stamps[begin]) - 1
    ranges = []
    row = begin
    while row < stop:
        end = min(bisect.bisect_left(stamps, bounds[segment + 1], row), stop)
        if end > row:
            ranges.append((segment, (row, end)))
        row = end
        segment += 1
    return ranges
