"""Downsampled tiers: per key (GPU) and time bucket, the count, sum, min and max of every metric.

The writer computes them from each block's rows when the block's slot closes (1 s and 1 min
buckets, aligned to multiples of the width on the monotonic clock) and stores them beside the
block; the reader computes the same from the rows of slots still open. Sums and counts are
exact integers, so a mean over any union of buckets is the mean over the raw samples in them,
and buckets of one time and key (a late sample's block) merge exactly. Clock-event reasons, a
bitmask, are kept as how many samples had each bit set, which is what a rule about throttling
needs and a mean of a bitmask is not.

A tier row (the decoded form) is `(bucket_start_ns, *keys, samples, count, total, min, max, ...,
*bit_counts)`: four numbers per metric, then REASON_BITS counts where the stream has a bitmask.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gpuwhy.recording.streams import REASON_BITS, Column, StreamSpec

# Host CPU shares are stored in tenths of a percent; tiers give them back in percent.
_PUBLIC_NAMES = {
    "cpu_system_permille": ("cpu_system_pct", 10),
    "job_cpu_permille": ("job_cpu_pct", 10),
}


class Summary(NamedTuple):
    """A metric over a bucket: samples that had it, their sum, min and max (record units)."""

    n: int  # samples that had the metric
    total: float
    minimum: float | None
    maximum: float | None

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None


@dataclass(frozen=True, slots=True)
class TierBucket:
    """One key's (GPU's) samples in [t_ns, t_ns + width_ns), summarised per metric.

    Holds the tier row as stored; `summary`, `mean` and `metrics` read it on demand, so a
    bucket costs one object however many metrics the stream has.
    """

    t_ns: int
    width_ns: int
    device: int | None  # None for host buckets
    samples: int
    values: tuple[Any, ...] = field(repr=False)  # count, total, min, max per metric, then bits
    names: Mapping[str, tuple[int, int]] = field(repr=False, compare=False)  # -> (slot, scale)
    bits: int = field(default=0, repr=False, compare=False)  # bit counts after the metrics

    def summary(self, metric: str) -> Summary | None:
        """The metric over the bucket, or None if no sample in it had the metric."""
        where = self.names.get(metric)
        if where is None:
            return None
        slot, scale = where
        count, total, low, high = self.values[slot : slot + 4]
        if not count:
            return None
        if scale == 1:
            return Summary(count, total, low, high)
        return Summary(count, total / scale, low / scale, high / scale)

    def mean(self, metric: str) -> float | None:
        """The metric's mean over the bucket, or None if no sample in it had the metric."""
        where = self.names.get(metric)
        if where is None:
            return None
        count = self.values[where[0]]
        return self.values[where[0] + 1] / count / where[1] if count else None

    @property
    def metrics(self) -> dict[str, Summary]:
        """Every metric with at least one value in the bucket."""
        found = {name: self.summary(name) for name in self.names}
        return {name: summary for name, summary in found.items() if summary is not None}

    @property
    def reason_counts(self) -> dict[int, int]:
        """Clock-event reason bit value -> samples in the bucket that had it set."""
        if not self.bits:
            return {}
        first = len(self.values) - self.bits
        return {1 << bit: n for bit, n in enumerate(self.values[first:]) if n}


def _layout(spec: StreamSpec) -> tuple[int, int]:
    """(keys, metric numbers) of a tier row after the bucket start."""
    bits = REASON_BITS if spec.reason_field else 0
    return len(spec.keys), 1 + 4 * len(spec.tier_metrics) + bits


def bucket_columns(spec: StreamSpec, full: Sequence[Column], width_ns: int) -> list[Column]:
    """Tier columns (bucket start, samples, 4 per metric, bit counts) of time-sorted rows."""
    times: Sequence[int] = full[0]  # type: ignore[assignment]  # time is never NULL
    if not times:
        return []
    starts: list[int] = []
    edges: list[int] = []
    index = 0
    while index < len(times):
        bucket = times[index] // width_ns * width_ns
        starts.append(bucket)
        edges.append(index)
        index = bisect.bisect_left(times, bucket + width_ns, index)
    edges.append(len(times))
    return [starts, *range_columns(spec, full, list(itertools.pairwise(edges)))]


def range_columns(
    spec: StreamSpec,
    full: Sequence[Column],
    spans: Sequence[tuple[int, int]],
    skip: Container[int] = (),
) -> list[Column]:
    """Tier columns after the bucket start (samples, 4 per metric, bit counts), one entry per
    non-empty row range `[a, b)` of `full` (time-sorted rows; the ranges need not cover them).
    Metrics whose index is in `skip` are left empty (as if never reported), unread."""
    sizes = [b - a for a, b in spans]
    buckets = len(spans)
    columns: list[Column] = [sizes]
    assert spec.tier_columns is not None
    if len(spans) == 1 and spans[0] != (0, len(full[0])):
        full = [column[spans[0][0] : spans[0][1]] for column in full]  # one range: its rows only
        spans = [(0, sizes[0])]
    # map() over the bucket slices keeps the per-bucket work in C: ~1 ms for a minute of one
    # GPU at 10 Hz; a column that is constant over the block (link width, memory plateau,
    # an unsupported metric) costs nothing per bucket.
    for metric, values in enumerate(spec.tier_columns(full, skip)):
        if metric in skip:
            columns += [[0] * buckets, [0] * buckets, [None] * buckets, [None] * buckets]
            continue
        first = values[spans[0][0]] if spans else None
        if values.count(first) == len(values):
            if first is None:
                columns += [[0] * buckets, [0] * buckets, [None] * buckets, [None] * buckets]
            else:
                columns += [
                    sizes,
                    [first * size for size in sizes],
                    [first] * buckets,
                    [first] * buckets,
                ]
            continue
        parts: list[Any] = [values[a:b] for a, b in spans]
        if None in values:
            parts = [
                list(itertools.compress(part, map(operator.is_not, part, _NONES))) for part in parts
            ]
            present = [part or [None] for part in parts]  # min([None]) is None: no values
            columns += [
                list(map(len, parts)),
                list(map(sum, parts)),
                list(map(min, present)),
                list(map(max, present)),
            ]
        else:
            columns += [sizes, list(map(sum, parts)), list(map(min, parts)), list(map(max, parts))]
    if spec.reason_field:
        columns += _bit_counts(full[spec.full.index(spec.reason_field)], spans)
    return columns


_NONES = itertools.repeat(None)  # endless: map() stops at the shorter input


def _bit_counts(reasons: Column, spans: Sequence[tuple[int, int]]) -> list[Column]:
    """Per bit of the mask, per bucket: how many samples had the bit set."""
    counts = [[0] * len(spans) for _ in range(REASON_BITS)]
    if reasons.count(0) + reasons.count(None) == len(reasons):
        return counts  # type: ignore[return-value]
    for slot, (a, b) in enumerate(spans):
        part = reasons[a:b]
        for value in set(part):
            if not value:
                continue
            times = part.count(value)
            for bit in range(min(value.bit_length(), REASON_BITS)):
                if value >> bit & 1:
                    counts[bit][slot] += times
    return counts  # type: ignore[return-value]


def _merge_min(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def _merge_max(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)


def merge_rows(
    spec: StreamSpec,
    rows: Iterable[tuple[Any, ...]],
    width_ns: int,
) -> Iterator[tuple[Any, ...]]:
    """Tier rows in (bucket, keys) order with rows of one bucket of `width_ns` merged into one.

    `rows` must come in order of time bucket (of `width_ns`) and, within a bucket, in any
    order: the rows of one bucket are gathered, sorted by key and merged.
    """
    keys, numbers = _layout(spec)
    metrics = len(spec.tier_metrics)
    pending: dict[tuple[Any, ...], list[Any]] = {}
    current: int | None = None
    for row in rows:
        bucket = row[0] // width_ns * width_ns
        if bucket != current:
            yield from _flush(pending, current)
            current = bucket
        key = row[1 : 1 + keys]
        values = row[1 + keys :]
        held = pending.get(key)
        if held is None:
            pending[key] = list(values)
        else:
            _merge(held, values, metrics, numbers)
    yield from _flush(pending, current)


def tier_layout(spec: StreamSpec) -> tuple[int, int]:
    """(metrics, numbers) of a tier row after its bucket start and keys: samples, then four
    numbers per metric (count, total, min, max), then the reason-bit counts."""
    return len(spec.tier_metrics), _layout(spec)[1]


def _merge(held: list[Any], values: Sequence[Any], metrics: int, numbers: int) -> None:
    held[0] += values[0]
    for m in range(metrics):
        base = 1 + 4 * m
        held[base] += values[base]
        held[base + 1] += values[base + 1]
        held[base + 2] = _merge_min(held[base + 2], values[base + 2])
        held[base + 3] = _merge_max(held[base + 3], values[base + 3])
    for bit in range(1 + 4 * metrics, numbers):
        held[bit] += values[bit]


def _flush(
    pending: dict[tuple[Any, ...], list[Any]],
    bucket: int | None,
) -> Iterator[tuple[Any, ...]]:
    if bucket is not None:
        for key in sorted(pending, key=lambda k: tuple(-1 if v is None else v for v in k)):
            yield (bucket, *key, *pending[key])
    pending.clear()


_NAMES: dict[str, dict[str, tuple[int, int]]] = {}


def _names(spec: StreamSpec) -> dict[str, tuple[int, int]]:
    names = _NAMES.get(spec.name)
    if names is None:
        names = {}
        for m, name in enumerate(spec.tier_metrics):
            public, scale = _PUBLIC_NAMES.get(name, (name, 1))
            names[public] = (4 * m, scale)
        _NAMES[spec.name] = names
    return names


def metric_slots(spec: StreamSpec) -> Mapping[str, tuple[int, int]]:
    """Public metric name -> (offset of its four numbers after the samples count, the divisor
    from stored units to record units)."""
    return _names(spec)


def to_bucket(spec: StreamSpec, row: Sequence[Any], width_ns: int) -> TierBucket:
    """The public form of a tier row."""
    keys = len(spec.keys)
    return TierBucket(
        row[0],
        width_ns,
        row[1] if keys else None,
        row[1 + keys],
        tuple(row[2 + keys :]),
        _names(spec),
        REASON_BITS if spec.reason_field else 0,
    )
