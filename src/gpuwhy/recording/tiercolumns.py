"""Tier buckets as columns: what a drawing of a long run reads, without an object per bucket.

`Recording.gpu_tiers` gives one `TierBucket` per GPU and bucket, merged across blocks: right for
a few thousand buckets, slow for the 700,000 one-second buckets of a day on 8 GPUs. Here each
stored tier block (one GPU's slot) comes back as columns of the asked width, only the asked
metrics decoded. Buckets are not merged across blocks: a bucket wider than a slot, or one a
late block also holds, arrives in two parts, which a consumer adds (counts and sums add, minima
and maxima combine), as it would the buckets of a finer grid. Parts come in slot order.
"""

from __future__ import annotations

import bisect
import itertools
import sqlite3
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, NamedTuple, cast

from gpuwhy.model import NS_PER_S
from gpuwhy.recording import blockcolumns
from gpuwhy.recording.streams import REASON_BITS, TIER_WIDTHS_S, Column, StreamSpec
from gpuwhy.recording.tiers import metric_slots


class MetricColumns(NamedTuple):
    """One metric per bucket: samples that had it, their sum, min and max (None where n is 0)."""

    n: Sequence[int]
    total: Sequence[float]
    minimum: Sequence[float | None]
    maximum: Sequence[float | None]


class TierColumns(NamedTuple):
    """Buckets of one key (GPU; None for the host) as columns, in time order."""

    device: int | None
    width_ns: int
    t_ns: Sequence[int]  # bucket starts
    samples: Sequence[int]
    metrics: dict[str, MetricColumns]  # public metric name -> its columns, in record units
    # Per bucket, the clock-event reason bits any sample in it had (OR of the masks), where
    # the stream has a bitmask and its field was asked for; else None.
    reasons_seen: Sequence[int] | None = None


def tier_columns(
    db: sqlite3.Connection,
    spec: StreamSpec,
    width_ns: int,
    device: int | None,
    start_ns: int | None,
    end_ns: int | None,
    metrics: Collection[str] | None,
) -> Iterator[TierColumns]:
    """Buckets of `width_ns` (a multiple of 1 s) starting in [start_ns, end_ns), block by block
    (format 2 files; see the module doc on parts of a bucket)."""
    if width_ns <= 0 or width_ns % NS_PER_S:
        raise ValueError("tier width must be a positive multiple of one second")
    stored_s = max(w for w in TIER_WIDTHS_S if width_ns % (w * NS_PER_S) == 0)
    low = None if start_ns is None else -(-start_ns // width_ns) * width_ns
    slots = metric_slots(spec)
    wanted = {
        name: slots[name] for name in (slots if metrics is None else metrics) if name in slots
    }
    keep = {0, 1} | {2 + slot + i for slot, _ in wanted.values() for i in range(4)}
    width = 2 + 4 * len(spec.tier_metrics)
    reasons = spec.reason_field is not None and spec.reason_field in wanted
    bits = range(width, width + REASON_BITS) if spec.reason_field else range(0)
    if reasons:
        keep.update(bits)
    skip = [i for i in [*range(width), *bits] if i not in keep]
    keys = {} if device is None or not spec.keys else {"device": device}
    high = None if end_ns is None else -(-end_ns // width_ns) * width_ns  # the last one whole
    part = _Parts(width_ns, wanted, width if reasons else None)
    for key, columns in blockcolumns.tier_block_columns(db, spec, stored_s, low, high, keys, skip):
        yield from part.of(key, columns, low, end_ns)


class _Parts:
    """Tier columns of a stored block (or of joined blocks) at the asked width."""

    def __init__(
        self, width_ns: int, wanted: dict[str, tuple[int, int]], reasons_at: int | None
    ) -> None:
        self.width_ns = width_ns
        self.wanted = wanted
        self.reasons_at = reasons_at  # where the reason-bit counts start, if asked for
        self.same = width_ns in (w * NS_PER_S for w in TIER_WIDTHS_S)

    def of(
        self, key: tuple[Any, ...], columns: Sequence[Column], low: int | None, end_ns: int | None
    ) -> Iterator[TierColumns]:
        starts: Sequence[int] = columns[0]  # type: ignore[assignment]  # never NULL
        groups = _groups(starts, self.width_ns, low, end_ns)
        if not groups:
            return
        first_row = groups[0][1][0]
        same = self.same and len(groups) == len(starts) - first_row
        grouped = _grouper([rows for _, rows in groups])
        samples = columns[1][first_row:] if same else list(map(sum, grouped(columns[1])))
        found: dict[str, MetricColumns] = {}
        for name, (slot, scale) in self.wanted.items():
            parts = columns[2 + slot : 6 + slot]
            if same:
                merged: Sequence[Sequence[Any]] = tuple(part[first_row:] for part in parts)
            else:  # a metric every sample had: its counts are the bucket's samples
                every = parts[0] == columns[1]  # counts equal to the samples
                merged = _merge(parts, grouped, cast(Sequence[int], samples) if every else None)
            found[name] = _scaled(merged, scale)
        seen = None
        if self.reasons_at is not None:
            seen = [0] * len(groups)
            for bit, column in enumerate(columns[self.reasons_at : self.reasons_at + REASON_BITS]):
                counts = column[first_row:] if same else list(map(sum, grouped(column)))
                for index in itertools.compress(range(len(groups)), counts):
                    seen[index] |= 1 << bit
        starts = [g for g, _ in groups]
        yield TierColumns(
            key[0] if key else None,
            self.width_ns,
            starts,
            samples,  # type: ignore[arg-type]
            found,
            seen,
        )


def _groups(
    starts: Sequence[int],
    width_ns: int,
    low: int | None,
    end_ns: int | None,
) -> list[tuple[int, tuple[int, int]]]:
    """(bucket start, [a, b) rows) of the asked width inside the range, in order."""
    groups = []
    row = 0
    total = len(starts)
    while row < total:
        bucket = starts[row] // width_ns * width_ns
        stop = bisect.bisect_left(starts, bucket + width_ns, row)
        if (low is None or bucket >= low) and (end_ns is None or bucket < end_ns):
            groups.append((bucket, (row, stop)))
        row = stop
    return groups


def _grouper(
    spans: list[tuple[int, int]],
) -> Callable[[Sequence[Any]], Iterator[Sequence[Any]]]:
    """A function giving a column's values group by group (the row ranges `spans`)."""
    first, last = spans[0][0], spans[-1][1]
    size = spans[0][1] - first
    if last - first == size * len(spans) and all(b - a == size for a, b in spans):
        # Groups of one size (whole buckets, no second missing): zip cuts them at C speed.
        def full(column: Sequence[Any]) -> Iterator[Sequence[Any]]:
            return zip(*[iter(column[first:last])] * size, strict=True)

        return full

    def ranges(column: Sequence[Any]) -> Iterator[Sequence[Any]]:
        return (column[a:b] for a, b in spans)

    return ranges


def _merge(
    parts: Sequence[Sequence[Any]],
    groups: Callable[[Sequence[Any]], Iterator[Sequence[Any]]],
    counts: Sequence[int] | None = None,
) -> MetricColumns:
    n, total, low, high = parts
    counts = list(map(sum, groups(n))) if counts is None else counts
    if not any(counts):  # a metric this GPU never reported in the block
        empty: list[Any] = [None] * len(counts)
        return MetricColumns(counts, [0] * len(counts), empty, empty)
    totals = list(map(sum, groups(total)))
    if low[0] is not None and low.count(low[0]) == len(low) == high.count(low[0]):
        steady = [low[0]] * len(counts)  # a constant metric (a memory plateau, a link width)
        return MetricColumns(counts, totals, steady, steady)
    if None not in low and None not in high:  # every stored bucket had the metric
        return MetricColumns(
            counts, totals, list(map(min, groups(low))), list(map(max, groups(high)))
        )
    lows = [[v for v in part if v is not None] for part in groups(low)]
    highs = [[v for v in part if v is not None] for part in groups(high)]
    return MetricColumns(
        counts,
        totals,
        [min(v) if v else None for v in lows],
        [max(v) if v else None for v in highs],
    )


def _scaled(parts: Sequence[Sequence[Any]], scale: int) -> MetricColumns:
    n, total, low, high = parts
    if scale == 1:
        return MetricColumns(n, total, low, high)
    return MetricColumns(
        n,
        [t / scale for t in total],
        [None if v is None else v / scale for v in low],
        [None if v is None else v / scale for v in high],
    )
