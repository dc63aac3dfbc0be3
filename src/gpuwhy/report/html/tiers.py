"""Downsampled tiers for the HTML timeline: a grid of buckets, a few resolutions, a byte each.

A 24 h run on 8 GPUs at 10 Hz holds about 7 million samples; drawn raw that is tens of MB of JSON.
The report instead keeps, for every series, a pyramid of tiers: the finest tier at the sampling
period where the byte budget allows (every sample, "full detail"), else at the smallest bucket
that fits; each coarser tier merges FACTOR buckets of the one below, down to an overview tier of at
most OVERVIEW_BUCKETS buckets. A bucket of an aggregated tier carries min, max and mean, so the
drawing keeps the dips a mean would hide. The browser draws the coarsest tier that still gives at
least one bucket per pixel, so a redraw touches a few thousand buckets whatever the zoom.

Values are quantized to one byte (0..qmax, MISSING = 255) over each series' own range and
shipped base64-encoded: 4/3 bytes per value. Integer series whose range fits a byte
(utilization 0..100 %) are stored exactly.
"""

from __future__ import annotations

import base64
import bisect
import itertools
import math
import operator
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

# Buckets of one tier merged into one of the next: 8 keeps the coarser tiers at 1/7 of the finest
# (factor 4 would cost 1/3), so 1 h on 8 GPUs at 10 Hz keeps every sample within the budget;
# the page then draws between 1 and 8 buckets per pixel.
FACTOR = 8
OVERVIEW_BUCKETS = 2048  # the coarsest tier: about one bucket per pixel of a wide screen
MISSING = 255  # byte value of a bucket without data
QMAX = 254  # byte value of a series' full scale
B64_BYTES_PER_VALUE = 4 / 3


@dataclass(frozen=True)
class TierPlan:
    """The bucket grid: where it starts and each tier's bucket width and count."""

    origin_ns: int
    widths_ns: tuple[int, ...]  # finest first
    counts: tuple[int, ...]
    raw: bool  # the finest tier is the sampling period itself: one value per bucket

    def aggregated(self, tier: int) -> bool:
        """Whether buckets of this tier hold min/max besides the mean."""
        return not (self.raw and tier == 0)


def _tier_sizes(span_ns: int, finest_ns: int) -> list[tuple[int, int]]:
    sizes = []
    width = finest_ns
    while True:
        count = max(1, math.ceil(span_ns / width))
        sizes.append((width, count))
        if count <= OVERVIEW_BUCKETS:
            return sizes
        width *= FACTOR


def tier_bytes(
    span_ns: int, finest_ns: int, *, raw: bool, full_series: int, mean_series: int
) -> int:
    """Encoded size of all tiers: `full_series` carry min/max/mean, `mean_series` a mean only."""
    total = 0.0
    for index, (_, count) in enumerate(_tier_sizes(span_ns, finest_ns)):
        arrays = full_series * (1 if raw and index == 0 else 3) + mean_series
        total += count * arrays * B64_BYTES_PER_VALUE
    return math.ceil(total)


def plan_tiers(
    start_ns: int,
    end_ns: int,
    period_ns: int,
    *,
    full_series: int,
    mean_series: int,
    budget_bytes: int,
    whole_ns: int = 1_000_000_000,
) -> TierPlan:
    """The finest grid whose tiers fit `budget_bytes`, aligned on the sampling period.

    The grid starts half a period before `start_ns` (the first sample) so that samples taken
    every `period_ns` with some jitter each land in a bucket of their own. A finest bucket of
    `whole_ns` or more is rounded up to a multiple of it and the grid aligned to multiples of its
    width on the clock: the grid of the tiers a recording stores (whole seconds), which can then
    be read instead of every sample.
    """
    period_ns = max(int(period_ns), 1)

    def fits(finest: int, origin: int, raw: bool) -> bool:
        span = max(end_ns - origin, finest)
        size = tier_bytes(span, finest, raw=raw, full_series=full_series, mean_series=mean_series)
        return size <= budget_bytes or finest >= span

    origin_ns = start_ns - period_ns // 2
    multiple = 1
    finest = period_ns
    # Below whole_ns: multiples of the period, about 20 % coarser per try.
    while finest < whole_ns and not fits(finest, origin_ns, multiple == 1):
        multiple = max(multiple + 1, math.ceil(multiple * 1.2))
        finest = period_ns * multiple
    raw = multiple == 1
    if finest >= whole_ns and not (raw and fits(finest, origin_ns, True)):
        # The finest whole multiple of whole_ns that fits: doubling, then bisection.
        def whole_fits(units: int) -> bool:
            width = units * whole_ns
            return fits(width, start_ns // width * width, False)

        low = high = math.ceil(finest / whole_ns)
        while not whole_fits(high):
            low, high = high + 1, high * 2
        while low < high:
            middle = (low + high) // 2
            low, high = (low, middle) if whole_fits(middle) else (middle + 1, high)
        finest = high * whole_ns
        origin_ns = start_ns // finest * finest
        raw = False
    sizes = _tier_sizes(max(end_ns - origin_ns, finest), finest)
    return TierPlan(origin_ns, tuple(w for w, _ in sizes), tuple(c for _, c in sizes), raw)


class Buckets:
    """Count, sum, min and max per bucket of one series on the finest grid."""

    __slots__ = ("counts", "maxs", "mins", "sums")

    def __init__(self, count: int) -> None:
        self.counts = array("q", bytes(8 * count))
        self.sums = array("d", bytes(8 * count))
        self.mins = array("d", [math.inf]) * count
        self.maxs = array("d", [-math.inf]) * count

    def add_summary(self, index: int, count: int, total: float, low: float, high: float) -> None:
        """Several samples at once (a bucket of a recording's stored tiers)."""
        self.counts[index] += count
        self.sums[index] += total
        if low < self.mins[index]:
            self.mins[index] = low
        if high > self.maxs[index]:
            self.maxs[index] = high

    def add_columns(
        self,
        indices: Sequence[int],
        counts: Sequence[int],
        totals: Sequence[float],
        lows: Sequence[float | None],
        highs: Sequence[float | None],
    ) -> None:
        """Many buckets at once (ascending indices; a low/high of None where a count is 0):
        array arithmetic over the run of buckets they cover, not a call per bucket."""
        if not indices:
            return
        first, stop = indices[0], indices[-1] + 1
        if stop - first != len(indices) or first < 0 or stop > len(self.counts):
            for index, count, total, low, high in zip(
                indices, counts, totals, lows, highs, strict=True
            ):
                if count and 0 <= index < len(self.counts):
                    self.add_summary(index, count, total, low, high)  # type: ignore[arg-type]
            return
        lows, highs = _filled(lows, math.inf), _filled(highs, -math.inf)
        part = slice(first, stop)
        if not any(self.counts[part]):  # the usual case: these buckets are still empty
            self.counts[part] = array("q", counts)
            self.sums[part] = array("d", totals)
            self.mins[part] = array("d", lows)
            self.maxs[part] = array("d", highs)
            return
        self.counts[part] = array("q", map(operator.add, self.counts[part], counts))
        self.sums[part] = array("d", map(operator.add, self.sums[part], totals))
        self.mins[part] = array("d", map(min, self.mins[part], lows))
        self.maxs[part] = array("d", map(max, self.maxs[part], highs))

    def add(self, index: int, value: float) -> None:
        """One sample in bucket `index`."""
        self.counts[index] += 1
        self.sums[index] += value
        if value < self.mins[index]:
            self.mins[index] = value
        if value > self.maxs[index]:
            self.maxs[index] = value

    def coarser(self, factor: int = FACTOR) -> Buckets:
        """Merge every `factor` buckets into one (empty buckets hold ±inf: neutral here)."""

        def groups(values: array[Any], fill: float) -> Iterator[tuple[Any, ...]]:
            # `factor` at a time, the last group padded with a neutral value (C speed).
            return itertools.zip_longest(*[iter(values)] * factor, fillvalue=fill)

        merged = Buckets(0)
        merged.counts = array("q", map(sum, groups(self.counts, 0)))
        merged.sums = array("d", map(sum, groups(self.sums, 0.0)))
        merged.mins = array("d", map(min, groups(self.mins, math.inf)))
        merged.maxs = array("d", map(max, groups(self.maxs, -math.inf)))
        return merged

    def observed_range(self) -> tuple[float, float] | None:
        """The smallest and largest value seen, or None for a series without data."""
        low, high = min(self.mins), max(self.maxs)  # empty buckets hold +inf / -inf
        return None if low > high else (low, high)


def _filled(values: Sequence[float | None], neutral: float) -> Sequence[float]:
    """`values` with None replaced by `neutral` (found at C speed; usually there is none)."""
    if None not in values:
        return values  # type: ignore[return-value]
    missing = itertools.compress(
        range(len(values)), map(operator.is_, values, itertools.repeat(None))
    )
    filled = list(values)
    for index in missing:
        filled[index] = neutral
    return filled  # type: ignore[return-value]


@dataclass(frozen=True)
class Scale:
    """How a series' values map to bytes: value = low + byte * step.

    The bytes span the series' own range, not the chart's: a memory line that moves between 60
    and 61 GiB keeps 4 MiB steps, and a constant series is exact.
    """

    low: float
    step: float
    qmax: int

    @classmethod
    def for_range(cls, low: float, high: float, *, integral: bool) -> Scale:
        """Exact for integers spanning at most QMAX, else QMAX even steps from low to high."""
        span = max(high - low, 0.0)
        if integral and float(low).is_integer() and span <= QMAX:
            return cls(low, 1.0, int(span))
        return cls(low, span / QMAX if span > 0 else 1.0, QMAX)

    def quantize(self, values: Sequence[float], counts: Sequence[int]) -> bytes:
        """One byte per bucket, round((value - low) / step) held to 0..qmax; MISSING where the
        bucket holds no sample. Chained map()s: C speed for the million values of a day."""
        low, factor, top = self.low, 1.0 / self.step, self.qmax
        empty = list(itertools.compress(range(len(counts)), map(operator.not_, counts)))
        if empty:  # their values are placeholders (0 or ±inf): keep them out of the arithmetic
            values = list(values)
            for index in empty:
                values[index] = low
        scaled = map(
            round,
            map(
                operator.mul,
                map(operator.sub, values, itertools.repeat(low)),
                itertools.repeat(factor),
            ),
        )
        if values and low <= min(values) and max(values) <= low + top * self.step:
            out = bytearray(scaled)  # inside the scale's range (as drawn values are): no clamp
        else:
            out = bytearray(map(max, map(min, scaled, itertools.repeat(top)), itertools.repeat(0)))
        for index in empty:
            out[index] = MISSING
        return bytes(out)


def encode(data: bytes) -> str:
    """Bytes as base64 text for the JSON block (atob() in the page decodes it)."""
    return base64.b64encode(data).decode("ascii")


def series_tiers(finest: Buckets, plan: TierPlan, scale: Scale) -> list[dict[str, str]]:
    """The encoded tiers of one series: {"mean"} or {"mean", "min", "max"} per tier."""
    tiers = []
    buckets = finest
    for index in range(len(plan.widths_ns)):
        if index:
            buckets = buckets.coarser()
        counts = buckets.counts
        means = [s / c if c else 0.0 for s, c in zip(buckets.sums, counts, strict=True)]
        tier = {"mean": encode(scale.quantize(means, counts))}
        if plan.aggregated(index):
            tier["min"] = encode(scale.quantize(buckets.mins, counts))
            tier["max"] = encode(scale.quantize(buckets.maxs, counts))
        tiers.append(tier)
    return tiers


def fraction_tiers(
    covered_ns: Sequence[float],
    plan: TierPlan,
    divisor: int,
) -> list[dict[str, str]]:
    """Encoded tiers of a 0..1 coverage series (time inside spans over bucket time × divisor)."""
    scale = Scale(0.0, 1.0 / QMAX, QMAX)
    tiers = []
    covered = list(covered_ns)
    for index, width in enumerate(plan.widths_ns):
        if index:
            covered = [sum(covered[i : i + FACTOR]) for i in range(0, len(covered), FACTOR)]
        fractions = [min(c / (width * max(divisor, 1)), 1.0) for c in covered]
        ones = [1] * len(fractions)
        tiers.append({"mean": encode(scale.quantize(fractions, ones))})
    return tiers


def add_coverage(covered_ns: list[float], plan: TierPlan, start_ns: int, end_ns: int) -> None:
    """Credit the finest buckets with the part of [start_ns, end_ns) inside each."""
    width = plan.widths_ns[0]
    count = len(covered_ns)
    first = max((start_ns - plan.origin_ns) // width, 0)
    last = min((end_ns - 1 - plan.origin_ns) // width, count - 1)
    for index in range(first, last + 1):
        bucket_start = plan.origin_ns + index * width
        overlap = min(end_ns, bucket_start + width) - max(start_ns, bucket_start)
        if overlap > 0:
            covered_ns[index] += overlap


def add_coverages(
    covered_ns: list[float], plan: TierPlan, starts_ns: Sequence[int], durations_ns: Sequence[int]
) -> None:
    """`add_coverage` for many spans sorted by start (a block of one process's input waits):
    the spans between two bucket edges are summed as a slice, and only the few that cross an
    edge are split as `add_coverage` splits them."""
    count = len(starts_ns)
    if not count:
        return
    ends = list(map(operator.add, starts_ns, durations_ns))
    if not (
        all(map(operator.le, ends, itertools.islice(starts_ns, 1, None))) and min(durations_ns) >= 0
    ):  # overlapping or unordered: span by span
        for start, end in zip(starts_ns, ends, strict=True):
            add_coverage(covered_ns, plan, start, end)
        return
    width, origin, buckets = plan.widths_ns[0], plan.origin_ns, len(covered_ns)
    first = (starts_ns[0] - origin) // width
    last = (ends[-1] - 1 - origin) // width
    row = 0
    for index in range(first, last + 1):
        edge = origin + (index + 1) * width
        stop = bisect.bisect_left(starts_ns, edge, row)  # spans starting in this bucket
        if stop > row:
            crossing = ends[stop - 1] > edge  # only the last can reach past the edge
            whole = stop - 1 if crossing else stop
            if whole > row and 0 <= index < buckets:
                covered_ns[index] += sum(durations_ns[row:whole])
            if crossing:
                add_coverage(covered_ns, plan, starts_ns[stop - 1], ends[stop - 1])
        row = stop
