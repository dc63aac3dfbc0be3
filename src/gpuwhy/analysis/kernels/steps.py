"""Kernel-level facts per profiler step: what the device did, why it idled, what the host waited on.

A step is the host's ``ProfilerStep#N`` range; its window runs to the next step's start (the
last step's to its own end), so back-to-back windows cover the profiled time once. Device work is
clipped to the window: a kernel queued in step N and run in step N+1 counts where it ran. Where
the host ran well ahead of the device, its ranges do not bound the steps: they are projected onto
the device, each from where its first launched work began there (``_device_windows``).

Idle time of the device inside a window is split the way Holistic Trace Analysis splits it
(references.md#hta-idle-time), but on the device rather than per stream:

- *host wait*: the work that ended the gap had not even been launched when the device went idle —
  the device waited for the host (data loading, Python, launch overhead);
- *kernel wait*: the next work was queued and the gap is shorter than ``KERNEL_WAIT_NS``, the
  cost of starting back-to-back kernels;
- *other*: queued work that still did not start (waits on events, other streams, copies).

The data loader's *exposed* wait is the part of its calls during which the device was idle: a
wait the device spends running kernels already queued costs nothing, and counting it would
over-read on real traces (docs/traces.md, "Exposed waits"). A blocking sync costs the other way
round: while the host waits, the device finishes its queue, then idles until the host has
launched again; that gap, begun inside the sync, is the sync's cost (less any loading in it).
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuwhy.analysis.intervals import (
    Interval,
    IntervalSet,
    SortedRuns,
    subtract,
    total_ns,
    union,
)
from gpuwhy.analysis.kernels.copy_rate import PinnedRate, direction, pinned_ns, pinned_rates
from gpuwhy.traces import HostCall, OpKind, RankTrace

KERNEL_WAIT_NS = 30_000
"""Gaps between queued kernels shorter than this are launch overhead (HTA's
``consecutive_kernel_delay``, references.md#hta-idle-time)."""

LAUNCH_GAP_NS = 1_000_000
"""A host-wait gap shorter than this is the host issuing the step's next operator: an eager
framework's per-op dispatch and launch. Measured on the H200 capture (tiny_batch, eager PyTorch
with the profiler on): the gaps between a step's kernels had a median of 40 us and a longest of
0.5 ms; the data loader's wait in torch_loader was one gap of 18 ms a step
(references.md#hta-idle-time)."""


@dataclass(frozen=True)
class StepFacts:
    """One step of one rank. Times in nanoseconds."""

    number: int
    start_ns: int
    end_ns: int
    busy_ns: dict[int, int]  # device -> union of its work inside the window
    compute_ns: int  # unions on the rank's devices, clipped to the window
    communication_ns: int
    memcpy_ns: int
    memset_ns: int
    comm_overlap_ns: int  # communication also covered by compute
    idle_ns: int  # the window less the union of all device work
    host_wait_ns: int
    host_wait_short_ns: int  # of it, in gaps shorter than LAUNCH_GAP_NS: per-op issue
    kernel_wait_ns: int
    other_wait_ns: int
    kernels: int  # device ops starting inside the window
    kernel_median_ns: float | None
    loader_ns: int  # host time in the data loader's __next__
    loader_exposed_ns: int  # of it, while the device was idle
    launch_ns: int  # host time in launch calls (cudaLaunchKernel, cudaMemcpyAsync...)
    sync_ns: int  # host time blocked in synchronising calls
    sync_idle_ns: int  # device idle in the gaps that began while the host was blocked in a sync
    pageable_copy_ns: int  # device time of copies from/to pageable host memory
    pageable_copy_alone_ns: int  # of it, not hidden under compute
    # what the copies begun in the step would take from pinned memory; None: a size or rate
    # unknown (copy_rate.py)
    pageable_pinned_ns: float | None
    optimizer_ns: int

    @property
    def time_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def busy_fraction(self) -> float:
        busy = self.time_ns - self.idle_ns
        return busy / self.time_ns if self.time_ns > 0 else 0.0


@dataclass
class RankFacts:
    """A rank's steps and the devices it ran work on."""

    trace: RankTrace
    steps: list[StepFacts] = field(default_factory=list)
    devices: list[int] = field(default_factory=list)  # devices the rank ran work on
    marked: bool = True  # False: no step markers, the trace's device work is one window
    on_device: bool = False  # the steps' windows are projected onto the device (host ran ahead)
    busy: IntervalSet | None = None  # the union of all the rank's device work
    pinned_rates: dict[str, PinnedRate] = field(default_factory=dict)  # per copy direction

    # per device, its busy time, idle split and work over the same step windows
    device_facts: dict[int, DeviceFacts] = field(default_factory=dict)

    @property
    def has_device_work(self) -> bool:
        return bool(self.devices)


@dataclass(frozen=True)
class DeviceFacts:
    """One device of a rank over the rank's step windows, summed. Times in nanoseconds.

    The rank's own figures are unions over all its devices (one idle device hides nothing while
    another works); these are each device's alone, with its gaps split by what ended them on
    that device, so a host driving several GPUs shows which of them waited."""

    device: int
    time_ns: int  # the step windows' summed time
    busy_ns: int
    host_wait_ns: int
    kernel_wait_ns: int
    other_wait_ns: int
    compute_ns: int
    communication_ns: int
    memcpy_ns: int
    memset_ns: int
    kernels: int  # device ops starting inside the windows


def _overlap(first: Sequence[Interval], second: Sequence[Interval]) -> int:
    """Length of the intersection of two sorted, disjoint interval lists."""
    return SortedRuns.of(first).overlap_with_ns(SortedRuns.of(second))


def _sync_idle(
    gaps: Sequence[Interval], syncs: Sequence[Interval], loader: Sequence[Interval]
) -> int:
    """Idle time of the gaps that began while the host was blocked in a sync, loading apart."""
    if not syncs:
        return 0
    starts = [start for start, _ in syncs]
    loading = SortedRuns.of(loader)
    idle = 0
    for lo, hi in gaps:
        index = bisect.bisect_right(starts, lo) - 1
        if index >= 0 and syncs[index][1] >= lo:
            idle += hi - lo - loading.overlap_ns(lo, hi)
    return idle


def _calls(calls: Sequence[HostCall], start: int, end: int) -> list[Interval]:
    return union((c.start_ns, c.end_ns) for c in calls if start <= c.start_ns < end)


@dataclass
class _Columns:
    """The rank's device work, sorted by start, with what the idle split needs."""

    starts: list[int]
    ends: list[int]
    launched: list[int | None]  # start of the host call that launched it
    # Each a union with binary-search clipping: a step looks only at its own window, so a
    # trace of hundreds of steps costs steps x log(intervals), not steps x intervals.
    by_kind: dict[OpKind, IntervalSet]
    pageable: IntervalSet
    # the pageable copies by start: their sizes (bytes) and directions ("HtoD"...)
    pageable_starts: list[int]
    pageable_sizes: list[int]
    pageable_ways: list[str | None]
    busy: dict[int, IntervalSet]
    all_busy: IntervalSet
    launch_starts: list[int]  # the host's launch calls, sorted by start
    launch_cumulative: list[int]  # their summed durations up to each (prefix sums)


def _columns(trace: RankTrace, device: int | None = None) -> _Columns:
    """The rank's device work (one device's only, given ``device``) in columns."""
    ops = trace.ops
    kept = (
        range(len(ops))
        if device is None
        else [i for i in range(len(ops)) if ops.device[i] == device]
    )
    order = sorted(kept, key=ops.start_ns.__getitem__)
    starts = [ops.start_ns[i] for i in order]
    ends = [ops.end_ns[i] for i in order]
    launches = trace.launch_start_ns
    launched = [launches.get(ops.correlation[i]) if ops.correlation[i] else None for i in order]
    by_kind: dict[OpKind, list[Interval]] = {kind: [] for kind in OpKind}
    per_device: dict[int, list[Interval]] = {}
    pageable = []
    sizes: list[int] = []
    ways: list[str | None] = []
    for i in order:
        span = (ops.start_ns[i], ops.end_ns[i])
        by_kind[OpKind(ops.kind[i])].append(span)
        per_device.setdefault(ops.device[i], []).append(span)
        if ops.kind[i] == OpKind.MEMCPY and "Pageable" in (name := trace.names[ops.name[i]]):
            pageable.append(span)
            sizes.append(ops.size[i])
            ways.append(direction(name))
    return _Columns(
        starts=starts,
        ends=ends,
        launched=launched,
        by_kind={kind: IntervalSet(spans) for kind, spans in by_kind.items()},
        pageable=IntervalSet(pageable),
        pageable_starts=[start for start, _ in pageable],
        pageable_sizes=sizes,
        pageable_ways=ways,
        busy={device: IntervalSet(spans) for device, spans in per_device.items()},
        all_busy=IntervalSet(zip(starts, ends, strict=True)),
        **_launch_columns(trace),
    )


def _launch_columns(trace: RankTrace) -> dict[str, list[int]]:
    calls = sorted(zip(trace.launch_call_start_ns, trace.launch_call_dur_ns, strict=True))
    cumulative = [0]
    for _, duration in calls:
        cumulative.append(cumulative[-1] + duration)
    return {"launch_starts": [start for start, _ in calls], "launch_cumulative": cumulative}


def _launch_ns(columns: _Columns, start: int, end: int) -> int:
    """Host time in the launch calls that began inside ``[start, end)``."""
    first = bisect.bisect_left(columns.launch_starts, start)
    last = bisect.bisect_left(columns.launch_starts, end)
    return columns.launch_cumulative[last] - columns.launch_cumulative[first]


@dataclass(frozen=True)
class _IdleSplit:
    host: int
    host_short: int  # host wait in gaps shorter than LAUNCH_GAP_NS
    kernel: int
    other: int


def _split_idle(columns: _Columns, gaps: Sequence[Interval]) -> _IdleSplit:
    """The given idle gaps split by the work that ended each."""
    host = host_short = kernel = other = 0
    for lo, hi in gaps:
        length = hi - lo
        nxt = bisect.bisect_left(columns.starts, hi)
        launched = columns.launched[nxt] if nxt < len(columns.starts) else None
        if nxt >= len(columns.starts) or columns.starts[nxt] != hi:
            other += length  # the window ended before any work resumed
        elif launched is not None and launched > lo:
            host += length
            if length < LAUNCH_GAP_NS:
                host_short += length
        elif length < KERNEL_WAIT_NS:
            kernel += length
        else:
            other += length
    return _IdleSplit(host, host_short, kernel, other)


HOST_AHEAD_RATIO = 1.5
"""The device ran the steps' work in at least this many times the host's time to issue it: the
host ran ahead of the device (launches are asynchronous; its queue took up the difference), so
the host's step markers do not bound the steps, and they are projected onto the device
(references.md#nsight-gpu-projection). Half again leaves room for the last step's work, which
ends after the host's last marker even when the host waits for the device every step."""


def _host_windows(trace: RankTrace, columns: _Columns) -> list[tuple[int, int, int]]:
    """(number, start, end): each step runs to the next one's start, the last to its own end.
    A trace without step markers is one window, from its first device work to its last."""
    steps = sorted(trace.steps, key=lambda step: step[1])
    if not steps and columns.starts:
        return [(0, columns.starts[0], max(columns.ends))]
    windows = []
    for index, (number, start, end) in enumerate(steps):
        stop = steps[index + 1][1] if index + 1 < len(steps) else end
        if stop > start:
            windows.append((number, start, stop))
    return windows


def _device_windows(
    host: list[tuple[int, int, int]], columns: _Columns
) -> list[tuple[int, int, int]] | None:
    """The host's step windows projected onto the device, as Nsight Systems projects a range:
    a step begins where the first work launched in its host window began on the device, the last
    ends where its work ended. None unless the host ran ahead (HOST_AHEAD_RATIO), or where a step
    launched nothing the trace can join to its launch (no correlation to go by)."""
    if len(host) < 2:
        return None
    starts = [start for _, start, _ in host]
    issued_end = host[-1][2]
    first: dict[int, int] = {}  # window -> its first work's start (columns sorted by start)
    ran_end = 0
    for start, end, launched in zip(columns.starts, columns.ends, columns.launched, strict=True):
        if launched is None or not starts[0] <= launched < issued_end:
            continue
        first.setdefault(bisect.bisect_right(starts, launched) - 1, start)
        ran_end = max(ran_end, end)
    if len(first) < len(host):
        return None
    begins = [first[index] for index in range(len(host))]
    if begins != sorted(begins) or ran_end - begins[0] < HOST_AHEAD_RATIO * (
        issued_end - starts[0]
    ):
        return None
    stops = [*begins[1:], ran_end]
    return [
        (number, begin, stop)
        for (number, _, _), begin, stop in zip(host, begins, stops, strict=True)
        if stop > begin
    ]


def _step_windows(trace: RankTrace, columns: _Columns) -> tuple[list[tuple[int, int, int]], bool]:
    """The steps' windows, and whether they are the device's (the host ran ahead of it)."""
    host = _host_windows(trace, columns)
    device = _device_windows(host, columns) if trace.steps else None
    return (device, True) if device is not None else (host, False)


TIMELINE_BUCKETS = 400  # points of the busy timeline: a page's width, whatever the trace's length


def busy_timeline(facts: RankFacts) -> dict[str, object] | None:
    """The device's busy share in equal buckets across the profiled steps, and where each step
    began: the trace's timeline at a glance (the HTML report draws it)."""
    if not facts.steps or not facts.devices:
        return None
    start, end = facts.steps[0].start_ns, facts.steps[-1].end_ns
    width = max((end - start) // TIMELINE_BUCKETS, 1)
    busy = facts.busy
    if busy is None:
        return None
    shares = [
        round(total_ns(busy.clip(lo, lo + width)) / width, 3)
        for lo in range(start, start + width * TIMELINE_BUCKETS, width)
    ]
    return {
        "bucket_s": width / 1e9,
        "busy": shares,
        "steps": [[s.number, (s.start_ns - start) / 1e9] for s in facts.steps],
    }


def rank_facts(trace: RankTrace) -> RankFacts:
    """Per-step kernel-level facts of one rank's trace."""
    columns = _columns(trace)
    facts = RankFacts(trace=trace, devices=sorted(columns.busy), busy=columns.all_busy)
    facts.marked = bool(trace.steps)
    facts.pinned_rates = pinned_rates(trace) if columns.pageable_starts else {}
    windows, facts.on_device = _step_windows(trace, columns)
    for number, start, end in windows:
        facts.steps.append(_step(trace, columns, facts.pinned_rates, number, start, end))
    if len(facts.devices) == 1:  # the rank's steps are its own: their figures, summed
        (device,) = facts.devices
        facts.device_facts[device] = _summed(device, facts.steps)
    else:  # each device over its own columns: its own gaps and work
        for device in facts.devices:
            facts.device_facts[device] = _device(_columns(trace, device), device, windows)
    return facts


def _summed(device: int, steps: Sequence[StepFacts]) -> DeviceFacts:
    """A rank's only device: its steps' figures, summed (the same windows, the same work)."""
    return DeviceFacts(
        device=device,
        time_ns=sum(s.time_ns for s in steps),
        busy_ns=sum(s.busy_ns.get(device, 0) for s in steps),
        host_wait_ns=sum(s.host_wait_ns for s in steps),
        kernel_wait_ns=sum(s.kernel_wait_ns for s in steps),
        other_wait_ns=sum(s.other_wait_ns for s in steps),
        compute_ns=sum(s.compute_ns for s in steps),
        communication_ns=sum(s.communication_ns for s in steps),
        memcpy_ns=sum(s.memcpy_ns for s in steps),
        memset_ns=sum(s.memset_ns for s in steps),
        kernels=sum(s.kernels for s in steps),
    )


def _device(columns: _Columns, device: int, windows: Sequence[tuple[int, int, int]]) -> DeviceFacts:
    """One device's figures over the step windows, from its own columns (a rank with several)."""
    time = busy = host = kernel = other = kernels = 0
    work = dict.fromkeys(OpKind, 0)
    for _, start, end in windows:
        spans = columns.all_busy.clip(start, end)
        split = _split_idle(columns, subtract([(start, end)], spans))
        time += end - start
        busy += total_ns(spans)
        host, kernel, other = host + split.host, kernel + split.kernel, other + split.other
        kernels += bisect.bisect_left(columns.starts, end) - bisect.bisect_left(
            columns.starts, start
        )
        for kind, intervals in columns.by_kind.items():
            work[kind] += total_ns(intervals.clip(start, end))
    return DeviceFacts(
        device=device,
        time_ns=time,
        busy_ns=busy,
        host_wait_ns=host,
        kernel_wait_ns=kernel,
        other_wait_ns=other,
        compute_ns=work[OpKind.COMPUTE],
        communication_ns=work[OpKind.COMMUNICATION],
        memcpy_ns=work[OpKind.MEMCPY],
        memset_ns=work[OpKind.MEMSET],
        kernels=kernels,
    )


def _step(
    trace: RankTrace,
    columns: _Columns,
    rates: dict[str, PinnedRate],
    number: int,
    start: int,
    end: int,
) -> StepFacts:
    busy = columns.all_busy.clip(start, end)
    gaps = subtract([(start, end)], busy)
    split = _split_idle(columns, gaps)
    compute = columns.by_kind[OpKind.COMPUTE].clip(start, end)
    comm = columns.by_kind[OpKind.COMMUNICATION].clip(start, end)
    first = bisect.bisect_left(columns.starts, start)
    last = bisect.bisect_left(columns.starts, end)
    durations = [columns.ends[i] - columns.starts[i] for i in range(first, last)]
    pageable = columns.pageable.clip(start, end)
    copies = slice(
        bisect.bisect_left(columns.pageable_starts, start),
        bisect.bisect_left(columns.pageable_starts, end),
    )
    loader = _calls(trace.loader, start, end)
    syncs = _calls(trace.syncs, start, end)
    return StepFacts(
        number=number,
        start_ns=start,
        end_ns=end,
        busy_ns={d: total_ns(spans.clip(start, end)) for d, spans in columns.busy.items()},
        compute_ns=total_ns(compute),
        communication_ns=total_ns(comm),
        memcpy_ns=total_ns(columns.by_kind[OpKind.MEMCPY].clip(start, end)),
        memset_ns=total_ns(columns.by_kind[OpKind.MEMSET].clip(start, end)),
        comm_overlap_ns=_overlap(comm, compute),
        idle_ns=total_ns(gaps),
        host_wait_ns=split.host,
        host_wait_short_ns=split.host_short,
        kernel_wait_ns=split.kernel,
        other_wait_ns=split.other,
        kernels=last - first,
        kernel_median_ns=statistics.median(durations) if durations else None,
        loader_ns=total_ns(loader),
        loader_exposed_ns=_overlap(loader, gaps),
        launch_ns=_launch_ns(columns, start, end),
        sync_ns=total_ns(syncs),
        sync_idle_ns=_sync_idle(gaps, syncs, loader),
        pageable_copy_ns=total_ns(pageable),
        pageable_copy_alone_ns=total_ns(pageable) - _overlap(pageable, compute),
        pageable_pinned_ns=pinned_ns(
            columns.pageable_sizes[copies], columns.pageable_ways[copies], rates
        ),
        optimizer_ns=total_ns(_calls(trace.optimizer, start, end)),
    )
