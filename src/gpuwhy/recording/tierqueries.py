"""Tiers of any width and exact summaries of any time window, from stored tiers and raw edges.

A summary of [start, end) takes the 1 min tier for the whole minutes inside, the 1 s tier for the
whole seconds left at either side, and raw samples only for the fractions of a second at the two
ends: a day-long window of 8 GPUs costs about 1,440 × 8 tier rows instead of 7 M samples, and
the result is exact (counts and sums are integers; min and max combine). Format-1 recordings
have no stored tiers: theirs are computed from the raw rows.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Collection, Container, Iterable, Iterator, Sequence
from operator import itemgetter
from typing import Any

from gpuwhy.model import NS_PER_S
from gpuwhy.recording import blockcolumns, blockreader, segments
from gpuwhy.recording.codec import READ_ERRORS
from gpuwhy.recording.streams import TIER_WIDTHS_S, Column, StreamSpec
from gpuwhy.recording.tiers import TierBucket, bucket_columns, merge_rows, to_bucket

Row = tuple[Any, ...]
_WHOLE = 1 << 62  # a bucket width that puts every monotonic timestamp in bucket 0


def _ceil(value: int, width: int) -> int:
    return -(-value // width) * width


class TierQueries:
    """Tier and summary queries over one open recording."""

    def __init__(self, db: sqlite3.Connection, damaged: Callable[[Exception], Exception]) -> None:
        self._db = db
        self._damaged = damaged

    def _raw(
        self, spec: StreamSpec, start_ns: int | None, end_ns: int | None, device: int | None
    ) -> Iterator[Row]:
        keys = {} if device is None or not spec.keys else {"device": device}
        return blockreader.rows(self._db, spec, start_ns, end_ns, keys)

    def _stored(
        self,
        spec: StreamSpec,
        width_s: int,
        start_ns: int | None,
        end_ns: int | None,
        device: int | None,
    ) -> Iterable[Row]:
        """Tier rows of a stored width."""
        keys = {} if device is None or not spec.keys else {"device": device}
        return blockreader.tier_rows(self._db, spec, width_s, start_ns, end_ns, keys)

    def tiers(
        self,
        spec: StreamSpec,
        width_ns: int,
        device: int | None,
        start_ns: int | None,
        end_ns: int | None,
    ) -> Iterator[TierBucket]:
        """Buckets of `width_ns` starting in [start_ns, end_ns), merged, in (time, key) order."""
        if width_ns <= 0 or width_ns % NS_PER_S:
            raise ValueError("tier width must be a positive multiple of one second")
        stored = max(w for w in TIER_WIDTHS_S if width_ns % (w * NS_PER_S) == 0)
        low = None if start_ns is None else _ceil(start_ns, width_ns)
        high = None if end_ns is None else _ceil(end_ns, width_ns)
        try:
            rows = self._stored(spec, stored, low, high, device)
            for row in merge_rows(spec, rows, width_ns):
                if (low is None or row[0] >= low) and (end_ns is None or row[0] < end_ns):
                    yield to_bucket(spec, row, width_ns)
        except READ_ERRORS as error:
            raise self._damaged(error) from error

    def summary(
        self, spec: StreamSpec, start_ns: int | None, end_ns: int | None, device: int | None
    ) -> dict[int | None, TierBucket]:
        """Per key, one bucket holding exactly the samples with start_ns <= t < end_ns."""
        try:
            if start_ns is None or end_ns is None:
                low, high = blockreader.time_bounds(self._db, spec)
                if low is None or high is None:
                    return {}
                start_ns = low if start_ns is None else start_ns
                end_ns = high + 1 if end_ns is None else end_ns
            parts: list[Iterable[Row]] = []
            for low, high, width_s in _plan(start_ns, end_ns):
                if width_s:
                    parts.append(self._stored(spec, width_s, low, high, device))
                else:
                    parts.append(_raw_tiers(spec, self._raw(spec, low, high, device), _WHOLE))
            merged = list(merge_rows(spec, itertools.chain.from_iterable(parts), _WHOLE))
        except READ_ERRORS as error:
            raise self._damaged(error) from error
        result: dict[int | None, TierBucket] = {}
        for row in merged:
            bucket = to_bucket(spec, (start_ns, *row[1:]), end_ns - start_ns)
            result[bucket.device] = bucket
        return result

    def segments(
        self,
        spec: StreamSpec,
        bounds: Sequence[int],
        device: int | None,
        metrics: Collection[str] | None = None,
    ) -> list[dict[int | None, TierBucket]]:
        """`summary` of every segment between consecutive `bounds` in one pass (segments.py)."""
        try:
            return segments.summarise(self, spec, bounds, device, metrics)
        except READ_ERRORS as error:
            raise self._damaged(error) from error

    def stored(
        self,
        spec: StreamSpec,
        width_s: int,
        start_ns: int | None,
        end_ns: int | None,
        device: int | None,
        skip_slots: Container[int] = (),
    ) -> Iterable[Row]:
        """Tier rows of a stored width (unmerged); those of the slots in
        `skip_slots` may be left out."""
        keys = {} if device is None or not spec.keys else {"device": device}
        return blockreader.tier_rows(self._db, spec, width_s, start_ns, end_ns, keys, skip_slots)

    def columns(
        self,
        spec: StreamSpec,
        start_ns: int,
        end_ns: int,
        device: int | None,
        skip: Container[str] = (),
    ) -> Iterator[tuple[tuple[Any, ...], list[Column]]]:
        """(key values, time-sorted full columns) of blocks holding rows of the range; fields
        in `skip` may come back all NULL (not decoded)."""
        keys = {} if device is None or not spec.keys else {"device": device}
        yield from blockcolumns.block_columns(self._db, spec, start_ns, end_ns, keys, skip)


def _plan(start_ns: int, end_ns: int) -> list[tuple[int, int, int]]:
    """(low, high, stored tier width in s, 0 = raw) pieces covering [start_ns, end_ns)."""
    pieces: list[tuple[int, int, int]] = []

    def cover(low: int, high: int, widths: tuple[int, ...]) -> None:
        if low >= high:
            return
        if not widths:
            pieces.append((low, high, 0))
            return
        width_ns = widths[0] * NS_PER_S
        inner_low, inner_high = _ceil(low, width_ns), high // width_ns * width_ns
        if inner_low >= inner_high:
            cover(low, high, widths[1:])
            return
        cover(low, inner_low, widths[1:])
        pieces.append((inner_low, inner_high, widths[0]))
        cover(inner_high, high, widths[1:])

    cover(start_ns, end_ns, tuple(sorted(TIER_WIDTHS_S, reverse=True)))
    return pieces


def _raw_tiers(spec: StreamSpec, rows: Iterable[Row], width_ns: int) -> Iterator[Row]:
    """Tier rows of `width_ns` computed from full rows in stream order."""
    key_positions = spec.key_positions
    key_of = itemgetter(*key_positions) if key_positions else (lambda row: ())
    for _bucket, bucket_rows in itertools.groupby(rows, key=lambda row: row[0] // width_ns):
        by_key: dict[Any, list[Row]] = defaultdict(list)
        for row in bucket_rows:
            by_key[key_of(row)].append(row)
        for key in sorted(by_key):
            group = by_key[key]
            columns = bucket_columns(spec, list(zip(*group, strict=True)), width_ns)
            keys = tuple(group[0][p] for p in key_positions)
            yield from ((row[0], *keys, *row[1:]) for row in zip(*columns, strict=True))
