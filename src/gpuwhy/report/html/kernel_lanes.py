"""The zoomable kernel timeline's data: per rank, every device op on its own stream's lane.

The trace page's script (assets/kernels.js) draws it. Each lane is one (device, stream) pair;
its ops are columns of integers: start as the gap from the previous op's start (small numbers,
a few bytes of JSON each), duration, an index into the rank's names, and the kind (OpKind).
Times are nanoseconds from the first profiled step's start. Beside them: the steps, and the
host's data-loader and blocking-sync calls, the two waits the idle split names.

A page stays small enough to mail (MAX_HTML_BYTES): at most MAX_OPS ops are drawn in all,
shared evenly among the ranks. A rank with more keeps its first whole steps up to its share;
``detail_end_ns`` says where detail stops, and the busy chart above still covers every step.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from gpuwhy.traces import HostCall, RankTrace

MAX_OPS = 80_000  # ~18 bytes of JSON an op: under 1.5 MB of the page's 5 MB
MIN_OPS_PER_RANK = 500  # however many ranks, each shows a few steps
MAX_NAME_CHARS = 300  # templated C++ kernel names run to thousands of characters


def _window(trace: RankTrace) -> tuple[int, int] | None:
    """The profiled steps' span, or the device work's where the trace marks no steps."""
    if trace.steps:
        return min(s for _, s, _ in trace.steps), max(e for _, _, e in trace.steps)
    if len(trace.ops):
        return min(trace.ops.start_ns), max(trace.ops.end_ns)
    return None


def _calls(calls: Sequence[HostCall], lo: int, hi: int) -> list[list[int]]:
    return [
        [max(c.start_ns, lo) - lo, min(c.end_ns, hi) - lo]
        for c in sorted(calls, key=lambda c: c.start_ns)
        if c.end_ns > lo and c.start_ns < hi
    ]


def _detail_end(trace: RankTrace, starts: list[int], lo: int, hi: int, budget: int) -> int:
    """Where detail stops: ``hi`` when every op fits, else the start of the last step that the
    first ``budget`` ops reach (whole steps read better than a step cut in two)."""
    if len(starts) <= budget:
        return hi
    cut = starts[budget]
    step_starts = sorted(s for _, s, _ in trace.steps if lo < s <= cut)
    return step_starts[-1] if step_starts else cut


def rank_lanes(trace: RankTrace, budget: int = MAX_OPS) -> dict[str, Any] | None:
    """One rank's timeline data, at most ``budget`` ops; None without device work."""
    window = _window(trace)
    ops = trace.ops
    if window is None or not len(ops):
        return None
    lo, hi = window
    inside = sorted(
        (i for i in range(len(ops)) if ops.end_ns[i] > lo and ops.start_ns[i] < hi),
        key=ops.start_ns.__getitem__,
    )
    starts = [ops.start_ns[i] for i in inside]
    end = _detail_end(trace, starts, lo, hi, budget)
    kept = inside[: bisect.bisect_left(starts, end)] if end < hi else inside
    names: dict[int, int] = {}
    lanes: dict[tuple[int, int], dict[str, list[int]]] = {}
    last_start: dict[tuple[int, int], int] = {}
    for i in sorted(kept, key=lambda i: (ops.device[i], ops.stream[i], ops.start_ns[i])):
        key = (ops.device[i], ops.stream[i])
        lane = lanes.setdefault(key, {"start": [], "dur": [], "name": [], "kind": []})
        start = max(ops.start_ns[i], lo) - lo
        lane["start"].append(start - last_start.get(key, 0))
        last_start[key] = start
        lane["dur"].append(min(ops.end_ns[i], hi) - lo - start)
        lane["name"].append(names.setdefault(ops.name[i], len(names)))
        lane["kind"].append(ops.kind[i])
    return {
        "rank": trace.rank,
        "span_ns": hi - lo,
        "names": [trace.names[n][:MAX_NAME_CHARS] for n in names],
        "lanes": [
            {"device": device, "stream": stream, **columns}
            for (device, stream), columns in sorted(lanes.items())
        ],
        "steps": [
            [number, start - lo, stop - lo]
            for number, start, stop in sorted(trace.steps, key=lambda s: s[1])
        ],
        "loader": _calls(trace.loader, lo, hi),
        "syncs": _calls(trace.syncs, lo, hi),
        "ops_total": len(inside),
        "ops_drawn": len(kept),
        "detail_end_ns": None if end >= hi else end - lo,
    }


def kernel_lanes(traces: Sequence[RankTrace]) -> list[dict[str, Any] | None]:
    """Every rank's timeline data, the op budget shared evenly among them."""
    budget = max(MAX_OPS // max(len(traces), 1), MIN_OPS_PER_RANK)
    return [rank_lanes(trace, budget) for trace in traces]
