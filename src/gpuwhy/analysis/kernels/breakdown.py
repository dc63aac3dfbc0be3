"""The device's time over a trace window, split as Holistic Trace Analysis splits it.

*Temporal* (references.md#hta-temporal): over the span from the first device work to the last,
idle = the span less the union of all work; compute = the union of compute kernels; non-compute =
the rest (communication, copies, sets not hidden under compute). These are the figures HTA's
users know, so gpuwhy gives the same ones, over the same window, and a test checks them on
HTA's own traces. The window is the work the host launched before ``before_ns`` (HTA's default
leaves the last profiled step out: its kernels may run past the end of the trace).

*Idle per stream* (references.md#hta-idle-time): on each stream, the gap before each op (its start
less the previous op's end on that stream) is *host wait* when the host launched the op only after
the previous one had ended, else *kernel wait* when the gap is under KERNEL_WAIT_NS, else *other*.
Per stream rather than per device (steps.py), so a stream that waits on another shows as such.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from gpuwhy.analysis.intervals import total_ns, union
from gpuwhy.analysis.kernels.steps import KERNEL_WAIT_NS
from gpuwhy.traces import OpKind, RankTrace


@dataclass(frozen=True)
class Temporal:
    span_ns: int  # first device work's start to the last one's end
    idle_ns: int
    compute_ns: int
    non_compute_ns: int

    def shares(self) -> dict[str, float]:
        span = self.span_ns or 1
        return {
            "idle": round(self.idle_ns / span, 4),
            "compute": round(self.compute_ns / span, 4),
            "non_compute": round(self.non_compute_ns / span, 4),
        }


def without_last_step(trace: RankTrace) -> int | None:
    """The start of the last profiled step, or None when fewer than two steps were profiled."""
    starts = sorted({start for _, start, _ in trace.steps})
    return starts[-1] if len(starts) >= 2 else None


def _launched_before(trace: RankTrace, before_ns: int | None) -> Iterator[int]:
    """The ops whose launch began before ``before_ns`` (every op: None)."""
    ops = trace.ops
    launches = trace.launch_start_ns
    for i in range(len(ops)):
        if before_ns is not None:
            launched = launches.get(ops.correlation[i])
            if launched is None or launched >= before_ns:
                continue
        yield i


def temporal(trace: RankTrace, before_ns: int | None = None) -> Temporal | None:
    """Idle/compute/non-compute of the device work launched before ``before_ns`` (all: None)."""
    ops = trace.ops
    kept = []
    compute = []
    for i in _launched_before(trace, before_ns):
        span = (ops.start_ns[i], ops.end_ns[i])
        kept.append(span)
        if ops.kind[i] == OpKind.COMPUTE:
            compute.append(span)
    if not kept:
        return None
    busy = union(kept)
    span_ns = busy[-1][1] - busy[0][0]
    idle = span_ns - total_ns(busy)
    compute_ns = total_ns(union(compute))
    return Temporal(
        span_ns=span_ns,
        idle_ns=idle,
        compute_ns=compute_ns,
        non_compute_ns=span_ns - idle - compute_ns,
    )


@dataclass(frozen=True)
class StreamIdle:
    """One stream's idle time by cause, in ns."""

    host_wait_ns: int
    kernel_wait_ns: int
    other_ns: int

    @property
    def total_ns(self) -> int:
        return self.host_wait_ns + self.kernel_wait_ns + self.other_ns

    def shares(self) -> dict[str, float]:
        total = self.total_ns or 1
        return {
            "host_wait": round(self.host_wait_ns / total, 4),
            "kernel_wait": round(self.kernel_wait_ns / total, 4),
            "other": round(self.other_ns / total, 4),
        }


def stream_idle(trace: RankTrace, before_ns: int | None = None) -> dict[int, StreamIdle]:
    """Per stream, the idle time before each op of the work launched before ``before_ns``."""
    ops = trace.ops
    launches = trace.launch_start_ns
    by_stream: dict[int, list[int]] = {}
    for i in _launched_before(trace, before_ns):
        by_stream.setdefault(ops.stream[i], []).append(i)
    found = {}
    for stream, indices in sorted(by_stream.items()):
        indices.sort(key=ops.start_ns.__getitem__)
        host = kernel = other = 0
        for previous, i in itertools.pairwise(indices):
            gap = ops.start_ns[i] - ops.end_ns[previous]
            launched = launches.get(ops.correlation[i]) if ops.correlation[i] else None
            if launched is not None and launched > ops.end_ns[previous]:
                host += gap
            elif gap < KERNEL_WAIT_NS:
                kernel += gap
            else:
                other += gap
        found[stream] = StreamIdle(host, kernel, other)
    return found
