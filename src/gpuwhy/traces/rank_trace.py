"""What gpuwhy keeps of one rank's profiler trace: device work, launches, steps, host waits.

Only the events the analysis reads are kept, in compact columns, so a trace of millions of events
costs a few bytes per kernel rather than a Python dict per event. Times are integer nanoseconds
on the trace's own clock (the profiler's microseconds, times 1000, exactly).
"""

from __future__ import annotations

import enum
from array import array
from dataclasses import dataclass, field

Interval = tuple[int, int]


class OpKind(enum.IntEnum):
    """What one piece of device work is (HTA's kernel types, with memory split in two)."""

    COMPUTE = 0
    COMMUNICATION = 1  # collectives and point-to-point (NCCL/RCCL kernels)
    MEMCPY = 2
    MEMSET = 3


@dataclass
class DeviceOps:
    """Device work (kernels, copies, sets) in columns, in the order the trace listed them."""

    start_ns: array[int] = field(default_factory=lambda: array("q"))
    end_ns: array[int] = field(default_factory=lambda: array("q"))
    device: array[int] = field(default_factory=lambda: array("i"))
    stream: array[int] = field(default_factory=lambda: array("q"))
    kind: array[int] = field(default_factory=lambda: array("b"))
    name: array[int] = field(default_factory=lambda: array("i"))  # index into RankTrace.names
    correlation: array[int] = field(default_factory=lambda: array("q"))  # 0: none given
    size: array[int] = field(default_factory=lambda: array("q"))  # a copy's bytes; 0: not given

    def __len__(self) -> int:
        return len(self.start_ns)

    def append(
        self,
        start: int,
        end: int,
        device: int,
        stream: int,
        kind: int,
        name: int,
        corr: int,
        size: int = 0,
    ) -> None:
        self.start_ns.append(start)
        self.end_ns.append(end)
        self.device.append(device)
        self.stream.append(stream)
        self.kind.append(kind)
        self.name.append(name)
        self.correlation.append(corr)
        self.size.append(size)


HOST_OP_MIN_NS = 10_000
"""Host operators shorter than this are not kept one by one (their time still counts in
``cpu_op_ns``): issuing an operator costs about this much whatever it does (a launch call
alone takes 5-20 us, references.md#hta-idle-time), so a shorter one did no work of its own worth
moving to the device; the per-operator cost is LAUNCH_BOUND's and HOST_BOUND's. An
operator's callers last longer than it, so those kept still show which ran inside another."""


@dataclass
class HostOps:
    """Host operators (Kineto `cpu_op`) of at least HOST_OP_MIN_NS, in columns, in trace order."""

    start_ns: array[int] = field(default_factory=lambda: array("q"))
    end_ns: array[int] = field(default_factory=lambda: array("q"))
    thread: array[int] = field(default_factory=lambda: array("q"))
    name: array[int] = field(default_factory=lambda: array("i"))  # index into RankTrace.op_names

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True, slots=True)
class HostCall:
    """A host-side range the analysis names: a blocking sync, a copy call, a data-loader pull."""

    name: str
    start_ns: int
    end_ns: int
    thread: int


@dataclass
class RankTrace:
    """One rank's trace (one file), reduced to what the kernel-level analysis reads."""

    path: str
    format: str = "kineto"  # what the file was: "kineto" (Chrome JSON) or "xplane" (XSpace)
    rank: int | None = None
    world_size: int | None = None
    devices: dict[int, str] = field(default_factory=dict)  # device id -> GPU name
    names: list[str] = field(default_factory=list)  # device-op names, interned
    ops: DeviceOps = field(default_factory=DeviceOps)
    # correlation id -> start of the host call that launched it (cudaLaunchKernel, ...)
    launch_start_ns: dict[int, int] = field(default_factory=dict)
    # each launch call (cudaLaunchKernel, cudaMemcpyAsync...): start and duration, in trace order
    launch_call_start_ns: array[int] = field(default_factory=lambda: array("q"))
    launch_call_dur_ns: array[int] = field(default_factory=lambda: array("q"))
    steps: list[tuple[int, int, int]] = field(default_factory=list)  # (number, start, end)
    loader: list[HostCall] = field(default_factory=list)  # enumerate(DataLoader)#...__next__
    optimizer: list[HostCall] = field(default_factory=list)  # Optimizer.step#...
    syncs: list[HostCall] = field(default_factory=list)  # host blocked on the device
    backward_seen: bool = False  # autograd ran: a training job, not inference
    # host operators (Kineto `cpu_op`): total time and calls per name, nested calls counted in
    # their callers' time too (what ran on the CPU, for NOT_ON_GPU's evidence)
    cpu_op_ns: dict[str, int] = field(default_factory=dict)
    cpu_op_calls: dict[str, int] = field(default_factory=dict)
    # the host operators one by one (HOST_OP_MIN_NS and longer), their names interned
    host_ops: HostOps = field(default_factory=HostOps)
    op_names: list[str] = field(default_factory=list)
    # every runtime/driver call (launch, copy, sync, allocation): its thread and start, in trace
    # order: a host operator with one inside it on its thread touched the device
    runtime_thread: array[int] = field(default_factory=lambda: array("q"))
    runtime_start_ns: array[int] = field(default_factory=lambda: array("q"))
    step_threads: set[int] = field(default_factory=set)  # the threads of the step markers
    events: int = 0  # trace events read
    # The host link's rate (bytes/s) where the trace comes with a recording that knows it
    # (`run --profile`: the GPU's PCIe generation and width), for copies from pinned memory.
    link_bytes_per_s: float | None = None

    def add_launch(self, start_ns: int, end_ns: int) -> None:
        self.launch_call_start_ns.append(start_ns)
        self.launch_call_dur_ns.append(end_ns - start_ns)

    @property
    def launch_calls(self) -> int:
        return len(self.launch_call_start_ns)

    @property
    def launch_call_ns(self) -> int:
        """Summed duration of the launch calls."""
        return sum(self.launch_call_dur_ns)
