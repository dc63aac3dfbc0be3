"""Read a PyTorch profiler (Kineto) trace as a stream: `*.pt.trace.json[.gz]`, one file a rank.

The file is Chrome trace JSON; its ``traceEvents`` array is parsed one event at a time (ijson's C
parser), so memory grows with the kept columns, never with the file. Both vocabularies Kineto
has written are read: ``kernel``/``gpu_memcpy``/``gpu_memset``/``cuda_runtime``/``cpu_op``
(PyTorch 1.10 on) and ``Kernel``/``Memcpy``/``Memset``/``Runtime``/``Operator`` (before).
Timestamps are microseconds, with nanosecond decimals in recent traces: they are read as exact
decimals (a float loses nanoseconds at today's epoch times) and kept as integer nanoseconds.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import IO, Any, cast

from gpuwhy.errors import InputFileError
from gpuwhy.traces.rank_trace import HOST_OP_MIN_NS, HostCall, OpKind, RankTrace


class TraceError(InputFileError):
    """A trace cannot be read: missing, truncated, corrupt, or not a profiler trace."""


_DEVICE_CATS = {
    "kernel": OpKind.COMPUTE,
    "Kernel": OpKind.COMPUTE,
    "gpu_memcpy": OpKind.MEMCPY,
    "Memcpy": OpKind.MEMCPY,
    "gpu_memset": OpKind.MEMSET,
    "Memset": OpKind.MEMSET,
}
_RUNTIME_CATS = {"cuda_runtime", "Runtime", "cuda_driver"}
_CPU_CATS = {"cpu_op", "Operator", "user_annotation", "python_function"}
_OPERATOR_CATS = {"cpu_op", "Operator"}  # the framework's operators (aten::mm...), old and new
# Collectives and point-to-point transfers run as NCCL (NVIDIA) or RCCL (AMD) kernels.
_COMM = re.compile(r"nccl|rccl", re.IGNORECASE)
_STEP = re.compile(r"ProfilerStep\s*#\s*(\d+)")
# Host calls that return only when the device has caught up (CUDA runtime API: synchronous
# behaviour); HIP's names are the same with "hip" for "cuda".
_BLOCKING = {
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cudaMemcpy2D",
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuEventSynchronize",
}
_LOADER_PREFIX = "enumerate(DataLoader)#"
_OPTIMIZER_PREFIX = "Optimizer.step#"
_BACKWARD_MARKS = ("autograd::engine::evaluate_function", "torch::autograd::AccumulateGrad")
_CHUNK = 1 << 20


def _ns(value: Any) -> int:
    """Trace microseconds (int, exact Decimal, or float) as integer nanoseconds."""
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, Decimal):
        return int(value * 1000)
    return round(float(value) * 1000)


def _open(path: str) -> IO[bytes]:
    try:
        raw = open(path, "rb")  # noqa: SIM115 - handed to the caller, closed there
    except OSError as error:
        raise TraceError(
            f"cannot read {path}: {error.strerror or error}", "check the path"
        ) from None
    head = raw.read(2)
    raw.seek(0)
    if head == b"\x1f\x8b":
        raw.close()
        return cast(IO[bytes], gzip.open(path, "rb"))
    return raw


def _read_meta(stream: IO[bytes]) -> dict[str, Any] | None:
    """The top-level fields before ``traceEvents``: Kineto writes its metadata first, so this
    reads the head of the file only. Fields after the array (``traceName``...) are not needed."""
    import ijson

    meta: dict[str, Any] = {}
    key: str | None = None
    builder: Any = None
    for prefix, event, value in ijson.parse(stream):
        if builder is not None:
            builder.event(event, value)
            if key is not None and prefix == key and event in ("end_map", "end_array"):
                meta[key] = builder.value
                builder = None
        elif prefix == "" and event == "map_key":
            key = value
        elif key is not None and prefix == key:
            if key == "traceEvents":
                return meta
            if event in ("start_map", "start_array"):
                builder = ijson.ObjectBuilder()
                builder.event(event, value)
            else:
                meta[key] = value
    return None  # a JSON document without a trace in it


def read_kineto(path: str) -> RankTrace:
    """The kept columns of one Kineto trace file (plain or gzip-compressed JSON)."""
    import ijson

    trace = RankTrace(path=path)
    stream = _open(path)
    try:
        head = stream.read(_CHUNK)
        if not head.lstrip()[:1] == b"{":
            raise TraceError(
                f"{path} is not a PyTorch profiler trace (expected a JSON object)",
                "give a *.pt.trace.json[.gz] file written by torch.profiler",
            )
        stream.seek(0)
        meta = _read_meta(stream)
        if meta is None:
            raise TraceError(
                f"{path} is JSON but not a profiler trace (no traceEvents array)",
                "give a *.pt.trace.json[.gz] file written by torch.profiler",
            )
        _take_meta(trace, meta)
        stream.seek(0)
        _take_events(trace, ijson.items(stream, "traceEvents.item"))
    except (ijson.JSONError, ijson.IncompleteJSONError) as error:
        raise TraceError(
            f"{path} is truncated or not valid JSON ({str(error).splitlines()[0][:80]})",
            "give the complete trace file as the profiler wrote it",
        ) from None
    except (OSError, EOFError, zlib.error) as error:
        raise TraceError(
            f"cannot read {path}: {error}", "give the complete trace file as the profiler wrote it"
        ) from None
    finally:
        stream.close()
    return trace


def _take_meta(trace: RankTrace, meta: Mapping[str, Any]) -> None:
    for device in meta.get("deviceProperties") or []:
        if isinstance(device, Mapping) and "id" in device:
            trace.devices[int(device["id"])] = str(device.get("name") or "GPU")
    info = meta.get("distributedInfo")
    if isinstance(info, Mapping):
        if isinstance(info.get("rank"), int):
            trace.rank = info["rank"]
        if isinstance(info.get("world_size"), int):
            trace.world_size = info["world_size"]


def _take_events(trace: RankTrace, events: Iterable[Mapping[str, Any]]) -> None:
    names: dict[str, int] = {}
    op_names: dict[str, int] = {}
    ops = trace.ops
    for event in events:
        trace.events += 1
        if event.get("ph") != "X":
            continue
        cat = event.get("cat")
        name = event.get("name")
        if not isinstance(name, str) or "ts" not in event:
            continue
        start = _ns(event["ts"])
        end = start + _ns(event.get("dur") or 0)
        args = event.get("args") or {}
        kind = _DEVICE_CATS.get(cat) if isinstance(cat, str) else None
        if kind is not None:
            if kind is OpKind.COMPUTE and _COMM.search(name):
                kind = OpKind.COMMUNICATION
            index = names.get(name)
            if index is None:
                index = names[name] = len(trace.names)
                trace.names.append(name)
            ops.append(
                start,
                end,
                int(args.get("device") or 0),
                int(args.get("stream") or 0),
                int(kind),
                index,
                int(args.get("correlation") or 0),
                int(args.get("bytes") or 0) if kind is OpKind.MEMCPY else 0,
            )
        elif cat in _RUNTIME_CATS:
            _take_runtime(trace, name, start, end, args, event.get("tid"))
            trace.runtime_thread.append(_tid(event.get("tid")))
            trace.runtime_start_ns.append(start)
        elif cat in _CPU_CATS or cat is None:
            _take_cpu(trace, name, start, end, event.get("tid"))
            if cat in _OPERATOR_CATS and not name.startswith("ProfilerStep"):  # older: cpu_op
                trace.cpu_op_ns[name] = trace.cpu_op_ns.get(name, 0) + end - start
                trace.cpu_op_calls[name] = trace.cpu_op_calls.get(name, 0) + 1
                if end - start >= HOST_OP_MIN_NS:
                    _take_host_op(trace, op_names, name, start, end, event.get("tid"))


def _tid(tid: Any) -> int:
    """A thread id as an integer: older traces write it as a string ("25738"); -1: none."""
    if isinstance(tid, int):
        return tid
    if isinstance(tid, str) and tid.lstrip("-").isdigit():
        return int(tid)
    return -1


def _take_host_op(
    trace: RankTrace, names: dict[str, int], name: str, start: int, end: int, tid: Any
) -> None:
    index = names.get(name)
    if index is None:
        index = names[name] = len(trace.op_names)
        trace.op_names.append(name)
    ops = trace.host_ops
    ops.start_ns.append(start)
    ops.end_ns.append(end)
    ops.thread.append(_tid(tid))
    ops.name.append(index)


def _take_runtime(
    trace: RankTrace, name: str, start: int, end: int, args: Mapping[str, Any], tid: Any
) -> None:
    correlation = int(args.get("correlation") or 0)
    if correlation:
        trace.launch_start_ns[correlation] = start
    if "Launch" in name or name.endswith("Async"):
        trace.add_launch(start, end)
    plain = "cuda" + name[3:] if name.startswith("hip") else name
    if plain in _BLOCKING:
        trace.syncs.append(HostCall(name, start, end, _tid(tid)))


def _take_cpu(trace: RankTrace, name: str, start: int, end: int, tid: Any) -> None:
    if name.startswith("ProfilerStep"):
        match = _STEP.match(name)
        if match:
            trace.steps.append((int(match.group(1)), start, end))
            trace.step_threads.add(_tid(tid))
    elif name.startswith(_LOADER_PREFIX):
        trace.loader.append(HostCall(name, start, end, _tid(tid)))
    elif name.startswith(_OPTIMIZER_PREFIX):
        trace.optimizer.append(HostCall(name, start, end, _tid(tid)))
    elif not trace.backward_seen and name.startswith(_BACKWARD_MARKS):
        trace.backward_seen = True
