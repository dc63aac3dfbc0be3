"""A TensorFlow/JAX profile (XPlane) as Chrome trace-event JSON, for ui.perfetto.dev.

Perfetto opens Kineto traces as they are, but not XSpace protobufs. What gpuwhy kept of a profile
is written back as complete events: each GPU's kernels and copies on one track per stream, and on
the host the steps, the input waits and the blocking syncs. Events are written one by one, so the
output never sits whole in memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from gpuwhy.traces import RankTrace


def _us(ns: int) -> float:
    return ns / 1000


def _events(trace: RankTrace, process: int) -> Iterator[dict[str, Any]]:
    host = (process + 1) * 1000  # pid 0 is not a process to some viewers
    yield {"ph": "M", "name": "process_name", "pid": host, "args": {"name": f"host · {trace.path}"}}
    for device in sorted(set(trace.ops.device)):
        model = trace.devices.get(device)
        name = f"GPU {device}" + (f" · {model}" if model and model != f"GPU {device}" else "")
        yield {"ph": "M", "name": "process_name", "pid": host + 1 + device, "args": {"name": name}}
    ops = trace.ops
    for i in range(len(ops)):
        yield {
            "ph": "X",
            "name": trace.names[ops.name[i]],
            "pid": host + 1 + ops.device[i],
            "tid": ops.stream[i],
            "ts": _us(ops.start_ns[i]),
            "dur": _us(ops.end_ns[i] - ops.start_ns[i]),
            "args": {"correlation": ops.correlation[i]},
        }
    for number, start, end in trace.steps:
        yield {"ph": "X", "name": f"step {number}", "pid": host, "tid": "steps",
               "ts": _us(start), "dur": _us(end - start)}  # fmt: skip
    for track, calls in (("input", trace.loader), ("syncs", trace.syncs)):
        for call in calls:
            yield {"ph": "X", "name": call.name, "pid": host, "tid": track,
                   "ts": _us(call.start_ns), "dur": _us(call.end_ns - call.start_ns)}  # fmt: skip


def write_profile_trace(traces: Sequence[RankTrace], out: TextIO) -> int:
    """Write the profiles as one Chrome trace; the number of events written."""
    out.write('{"displayTimeUnit": "ns", "traceEvents": [\n')
    count = 0
    for process, trace in enumerate(traces):
        for event in _events(trace, process):
            out.write((",\n" if count else "") + json.dumps(event, separators=(",", ":")))
            count += 1
    out.write('\n], "otherData": {"source": "gpuwhy export of XPlane profiles"}}\n')
    return count
