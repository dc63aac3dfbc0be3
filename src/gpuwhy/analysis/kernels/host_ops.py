"""Host operators that did the work on the CPU while the GPU idled: NOT_ON_GPU seen partly.

An operator the framework ran on the host touched the device only through the runtime: a launch,
a copy, a sync, an allocation, each a runtime call on the operator's thread inside its range
(Kineto joins the kernels to those calls by correlation id). An operator with none inside it
computed on the CPU. Of those, only the *top-level* ones count (an operator not inside another
on its thread: the inner ones' time is already in their caller's), only on the threads that ran
the steps (a pin-memory or other side thread is not on the step's path), and only for the time
the GPU was idle under them (*exposed*, as the data loader's wait is, steps.py): an operator
that runs on the host while queued kernels keep the device busy costs the step nothing.

What other findings own is left out: the data loader's calls (INPUT_BOUND: the operators that
collate a batch run inside them), blocking syncs (SYNC_BOUND), pageable copies (a runtime call,
PAGEABLE_COPY), and the step markers themselves.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from gpuwhy.analysis.intervals import Interval, IntervalSet, subtract, total_ns, union
from gpuwhy.analysis.kernels.steps import RankFacts
from gpuwhy.traces import RankTrace

_OWNED_PREFIXES = ("ProfilerStep", "enumerate(DataLoader)#")  # the step marker; INPUT_BOUND's

_METADATA_OPS = frozenset(
    f"aten::{name}"
    for name in (
        # PyTorch's view operators (references.md#torch-tensor-views): the same data
        "_reshape_alias", "_unsafe_view", "alias", "as_strided", "chunk", "detach", "detach_",
        "diagonal", "expand", "expand_as", "flatten", "movedim", "narrow", "numpy_T", "permute",
        "reshape", "select", "slice", "split", "split_with_sizes", "squeeze", "t", "transpose",
        "unbind", "unflatten", "unflatten_dense_tensors", "unfold", "unsqueeze", "view",
        "view_as",
        # allocation without filling: no data touched
        "empty", "empty_like", "empty_strided", "lift_fresh", "resize_", "set_",
    )
)  # fmt: skip
"""Operators that read or write no tensor data, whatever device the tensor is on: they cost the
same dispatch on CPU tensors as on GPU ones, so taking no kernel says nothing about where the
data is (DDP's `unflatten_dense_tensors` of GPU buckets takes 7-15 ms a call on a profiled A100
job: a hundred views, each timed)."""


@dataclass(frozen=True)
class CpuOps:
    """A rank's top-level host operators that launched nothing, and their exposed time."""

    exposed_ns: list[int]  # per step (RankFacts.steps' order): the union of their exposed time
    op_exposed_ns: dict[str, int] = field(default_factory=dict)  # per operator name, all steps
    op_ns: dict[str, int] = field(default_factory=dict)  # their host time, all steps
    op_calls: dict[str, int] = field(default_factory=dict)


def _runtime_starts(trace: RankTrace, threads: set[int]) -> dict[int, list[int]]:
    starts: dict[int, list[int]] = {}
    for thread, start in zip(trace.runtime_thread, trace.runtime_start_ns, strict=True):
        if thread in threads:
            starts.setdefault(thread, []).append(start)
    for values in starts.values():
        values.sort()
    return starts


def _top_level(trace: RankTrace, threads: set[int]) -> list[int]:
    """The host operators on ``threads`` that no other operator on their thread holds."""
    ops = trace.host_ops
    order = sorted(
        (i for i in range(len(ops)) if ops.thread[i] in threads),
        key=lambda i: (ops.thread[i], ops.start_ns[i], -ops.end_ns[i]),
    )
    kept: list[int] = []
    thread, end = None, 0
    for i in order:
        if ops.thread[i] == thread and ops.start_ns[i] < end:
            continue  # inside the last top-level operator (or overlapping it: not counted twice)
        kept.append(i)
        thread, end = ops.thread[i], ops.end_ns[i]
    return kept


def cpu_ops(facts: RankFacts) -> CpuOps | None:
    """The exposed time of the rank's host operators that launched no device work; None when
    the trace cannot tell (no step markers or no host operators kept) or its device ran nothing
    (the whole job on the CPU: placement.py's first case)."""
    trace, steps = facts.trace, facts.steps
    threads = trace.step_threads
    if not facts.marked or not facts.has_device_work or facts.busy is None or not trace.host_ops:
        return None
    runtime = _runtime_starts(trace, threads)
    owned = IntervalSet((c.start_ns, c.end_ns) for c in (*trace.loader, *trace.syncs))
    starts = [s.start_ns for s in steps]
    spans: list[list[Interval]] = [[] for _ in steps]
    found = CpuOps(exposed_ns=[])
    ops = trace.host_ops
    for i in _top_level(trace, threads):
        name = trace.op_names[ops.name[i]]
        start, end = ops.start_ns[i], ops.end_ns[i]
        calls = runtime.get(ops.thread[i], [])
        if (
            name in _METADATA_OPS
            or name.startswith(_OWNED_PREFIXES)
            or bisect.bisect_left(calls, start) < bisect.bisect_left(calls, end)
        ):
            continue  # no data touched, the step itself, the loader's, or it used the device
        index = bisect.bisect_right(starts, start) - 1
        if index < 0 or start >= steps[index].end_ns:
            continue  # outside the profiled steps
        lo, hi = start, min(end, steps[index].end_ns)
        idle = subtract([(lo, hi)], facts.busy.clip(lo, hi))
        exposed = [piece for span in idle for piece in subtract([span], owned.clip(*span))]
        spans[index].extend(exposed)
        found.op_exposed_ns[name] = found.op_exposed_ns.get(name, 0) + total_ns(exposed)
        found.op_ns[name] = found.op_ns.get(name, 0) + end - start
        found.op_calls[name] = found.op_calls.get(name, 0) + 1
    found.exposed_ns.extend(total_ns(union(step_spans)) for step_spans in spans)
    return found
