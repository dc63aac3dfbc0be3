"""Trace counters from a recording's stored tiers, and steps and input waits as counters.

For long windows (plan.py) a counter carries the mean of each second or minute, read
from the recording's 1-s or 1-min tier as columns (a day of 8 GPUs: 11,520 one-minute buckets
instead of 7 million samples); the clock-event reasons counter carries every reason bit seen in
the bucket. Steps and input waits too numerous to draw one by one become two counters per
process: steps started per second, and the share of each bucket spent waiting for input.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from gpuwhy.model import NS_PER_S, SpanKind
from gpuwhy.recording.streams import SLOT_NS
from gpuwhy.report.html.tiers import TierPlan, add_coverages
from gpuwhy.report.perfetto.plan import TracePlan
from gpuwhy.report.perfetto.tracks import (
    GPU_COUNTERS,
    GPU_PID_BASE,
    HOST_COUNTERS,
    HOST_PID,
    UNKNOWN_JOB_PID,
    UTIL_NAMES,
    Counters,
    number,
)

if TYPE_CHECKING:
    from gpuwhy.recording.reader import Recording
    from gpuwhy.recording.tiercolumns import TierColumns

REASONS = "clock_event_reasons"


def tier_counters(
    recording: Recording, plan: TracePlan, counters: Counters, ts: Callable[[int], float]
) -> None:
    """GPU, driver-utilization and host counters of the plan's window, one value per bucket."""
    width, low, high = plan.counter_width_ns, plan.start_ns, plan.end_ns
    floor = _floor(recording, low)
    gpu = [(field, name, unit, scale) for field, name, unit, scale in GPU_COUNTERS]
    util = [
        (field, UTIL_NAMES[kind], "%", 1.0) for kind, field in ((1, "gpu_pct"), (2, "memory_pct"))
    ]
    streams: list[
        tuple[Iterable[TierColumns], list[tuple[str, str, str, float]], Callable[[int | None], int]]
    ] = [
        (
            recording.gpu_tier_columns(width, low, high, [f for f, *_ in gpu]),
            gpu,
            lambda device: GPU_PID_BASE + (device or 0),
        ),
        (
            recording.util_tier_columns(width, low, high, [f for f, *_ in util]),
            util,
            lambda device: GPU_PID_BASE + (device or 0),
        ),
        (
            recording.host_tier_columns(width, low, high, [f for f, *_ in HOST_COUNTERS]),
            list(HOST_COUNTERS),
            lambda device: HOST_PID,
        ),
    ]
    for parts, tracks, pid_of in streams:
        for device, t_ns, values in _buckets(parts):
            pid, stamp = pid_of(device), ts(max(t_ns, floor))
            for field, name, unit, scale in tracks:
                value = values.get(field)
                if value is not None:
                    counters.put(pid, name, unit, number(value, scale), stamp)


def _floor(recording: Recording, low: int | None) -> int:
    """The earliest time a counter may carry: the window's start, else the run's."""
    return low if low is not None else recording.time_origin()


def _buckets(
    parts: Iterable[TierColumns],
) -> Iterable[tuple[int | None, int, dict[str, float]]]:
    """(device, bucket start, metric -> mean; "clock_event_reasons" -> the bits seen) per
    bucket in time order, parts of one bucket (from several blocks of a storage slot) added up."""
    pending: dict[tuple[int, int | None], list[Any]] = {}
    slot = None
    for part in parts:
        if not part.t_ns:
            continue
        here = part.t_ns[0] // SLOT_NS
        if slot is not None and here != slot:
            yield from _flush(pending)
        slot = here
        for index, t_ns in enumerate(part.t_ns):
            held = pending.setdefault((t_ns, part.device), [{}, 0])
            sums: dict[str, list[float]] = held[0]
            for name, columns in part.metrics.items():
                if columns.n[index]:
                    entry = sums.setdefault(name, [0, 0.0])
                    entry[0] += columns.n[index]
                    entry[1] += columns.total[index]
            if part.reasons_seen is not None:
                held[1] |= part.reasons_seen[index]
    yield from _flush(pending)


def _flush(
    pending: dict[tuple[int, int | None], list[Any]],
) -> Iterable[tuple[int | None, int, dict[str, float]]]:
    for t_ns, device in sorted(pending, key=lambda key: (key[0], -1 if key[1] is None else key[1])):
        sums, reasons = pending[(t_ns, device)]
        means = {name: total / n for name, (n, total) in sums.items()}
        if REASONS in means:
            means[REASONS] = reasons
        yield device, t_ns, means
    pending.clear()


def step_counters(
    recording: Recording, plan: TracePlan, counters: Counters, ts: Callable[[int], float]
) -> set[int]:
    """Per job process: steps started per second and % of time waiting for input, per bucket
    of the plan's summary width; returns the processes' track ids."""
    width = plan.summary_width_ns
    bounds = recording.time_range()
    if bounds is None:
        return set()
    low = plan.start_ns if plan.start_ns is not None else recording.time_origin()
    high = plan.end_ns if plan.end_ns is not None else bounds[1] + 1
    origin = low // width * width
    count = max(-(-(high - origin) // width), 1)
    grid = TierPlan(origin, (width,), (count,), False)
    steps: dict[int, list[int]] = {}
    waits: dict[int, list[float]] = {}
    for block in recording.span_columns(SpanKind.STEP, plan.start_ns, plan.end_ns):
        pid = UNKNOWN_JOB_PID if block.pid is None else block.pid
        weights = list(map(max, block.steps, itertools.repeat(1)))
        _per_bucket(steps.setdefault(pid, [0] * count), block.start_ns, weights, grid)
    for block in recording.span_columns(SpanKind.WAIT, plan.start_ns, plan.end_ns, steps=False):
        pid = UNKNOWN_JOB_PID if block.pid is None else block.pid
        add_coverages(waits.setdefault(pid, [0.0] * count), grid, block.start_ns, block.duration_ns)
    for pid in sorted(set(steps) | set(waits)):
        started, covered = steps.get(pid), waits.get(pid)
        for index in range(count):
            t_ns = max(origin + index * width, low)
            if t_ns >= high:
                break
            span_ns = min(origin + (index + 1) * width, high) - t_ns
            if started is not None:
                counters.put(
                    pid,
                    "steps per second",
                    "steps/s",
                    round(started[index] * NS_PER_S / span_ns, 3),
                    ts(t_ns),
                )
            if covered is not None:
                counters.put(
                    pid,
                    "input wait",
                    "%",
                    round(min(100 * covered[index] / span_ns, 100.0), 3),
                    ts(t_ns),
                )
    return set(steps) | set(waits)


def _per_bucket(
    into: list[int], starts: list[int] | Any, weights: list[int], grid: TierPlan
) -> None:
    """Add each span's weight to the bucket its start falls in (starts sorted: one slice
    sum per bucket)."""
    if not starts:
        return
    width, origin = grid.widths_ns[0], grid.origin_ns
    ordered = all(map(operator.le, starts, itertools.islice(starts, 1, None)))
    if not ordered:
        for start, weight in zip(starts, weights, strict=True):
            index = (start - origin) // width
            if 0 <= index < len(into):
                into[index] += weight
        return
    row = 0
    for index in range((starts[0] - origin) // width, (starts[-1] - origin) // width + 1):
        stop = bisect.bisect_left(starts, origin + (index + 1) * width, row)
        if stop > row and 0 <= index < len(into):
            into[index] += sum(weights[row:stop])
        row = stop
