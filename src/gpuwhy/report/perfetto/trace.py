"""A recording as Chrome trace-event JSON, which ui.perfetto.dev and chrome://tracing open.

Layout: one process track per GPU and one for the host carry the counters ("ph": "C"); the
job's processes carry their phase, step and input-wait spans as complete events ("ph": "X", one
thread track per span kind so they nest); events are global instants ("ph": "i"). Times are µs
since the run's start. A counter is written only when its value changes (it is a step function,
so nothing is lost) plus once at the end: long recordings of slowly changing values stay small.
The file is streamed event by event: memory does not grow with the recording.

A window of the run (`start_s`/`end_s`) exports alone. Long windows carry counters as 1-s or
1-min means from the recording's tiers, and steps and input waits as counters, so that a day on
eight GPUs still makes a trace a browser opens (plan.py); the trace's "otherData" says
what it holds. Track names and units: tracks.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from gpuwhy.model import NS_PER_S, Span, SpanKind
from gpuwhy.recording.reader import Recording
from gpuwhy.redact import recorded_command
from gpuwhy.report.perfetto.plan import TracePlan, plan_trace
from gpuwhy.report.perfetto.tiers import step_counters, tier_counters
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

__all__ = [
    "GPU_COUNTERS",
    "GPU_PID_BASE",
    "HOST_COUNTERS",
    "HOST_PID",
    "UTIL_NAMES",
    "TracePlan",
    "trace_plan",
    "write_trace",
]
_SPAN_TIDS = {SpanKind.PHASE: 1, SpanKind.STEP: 2, SpanKind.WAIT: 3}
_SPAN_THREADS = {1: "phases", 2: "steps", 3: "input waits"}


def _span_name(span: Span) -> str:
    if span.kind is SpanKind.PHASE:
        return span.phase
    if span.kind is SpanKind.WAIT:
        return f"{span.phase} input wait"
    if span.step is None:
        return f"{span.phase} step"
    if span.steps > 1:
        return f"{span.phase} steps {span.step}–{span.step + span.steps - 1}"
    return f"{span.phase} step {span.step}"


def _metadata(recording: Recording) -> Iterator[dict[str, Any]]:
    yield {"name": "process_name", "ph": "M", "pid": HOST_PID, "tid": 0, "args": {"name": "host"}}
    for device in recording.devices:
        pid = GPU_PID_BASE + device.index
        yield {
            "name": "process_name",
            "ph": "M",
            "pid": pid,
            "tid": 0,
            "args": {"name": f"GPU {device.index}: {device.name}"},
        }
        yield {
            "name": "process_sort_index",
            "ph": "M",
            "pid": pid,
            "tid": 0,
            "args": {"sort_index": device.index},
        }


def trace_plan(
    recording: Recording,
    start_s: float | None = None,
    end_s: float | None = None,
    resolution: str = "auto",
) -> TracePlan:
    """What `write_trace` with these arguments writes (plan.py)."""
    origin = recording.time_origin()
    low = None if start_s is None else origin + round(start_s * NS_PER_S)
    high = None if end_s is None else origin + round(end_s * NS_PER_S)
    return plan_trace(recording, low, high, resolution)


def write_trace(
    recording: Recording,
    out: TextIO,
    *,
    start_s: float | None = None,
    end_s: float | None = None,
    resolution: str = "auto",
    plan: TracePlan | None = None,
) -> int:
    """Write the trace of the window [start_s, end_s) (seconds from the run's start; None: the
    whole run) to `out`, streamed; returns the number of trace events. `resolution` ("auto",
    "raw", "1s", "1min") is how counters are written (plan.py says how "auto" picks);
    `plan`, from `trace_plan` with the same arguments, saves planning again.
    """
    bounds = recording.time_range()
    origin = recording.time_origin()
    plan = plan or trace_plan(recording, start_s, end_s, resolution)
    low, high = plan.start_ns, plan.end_ns
    count = 0
    first = True

    def write(text: str) -> None:
        nonlocal count, first
        out.write(text if first else ",\n" + text)
        first = False
        count += 1

    def emit(event: dict[str, Any]) -> None:
        write(json.dumps(event, separators=(",", ":"), ensure_ascii=False, default=str))

    def ts(t_ns: int) -> float:
        return round((t_ns - origin) / 1000, 3)

    out.write('{"traceEvents":[\n')
    for event in _metadata(recording):
        emit(event)
    counters = Counters(write)
    if plan.counter_width_ns:
        tier_counters(recording, plan, counters, ts)
    else:
        _sample_counters(recording, low, high, counters, ts)
    span_pids = _spans(recording, plan, emit, counters, ts)
    last = bounds[1] if bounds is not None else None
    if last is not None:
        counters.close(ts(last if high is None else min(last, high)))
    for pid in sorted(span_pids):
        label = "job (process unknown)" if pid == UNKNOWN_JOB_PID else f"job process {pid}"
        emit({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": label}})
        for tid, thread in _SPAN_THREADS.items():
            emit(
                {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": thread}}
            )
    for happened in recording.events():
        if (low is None or happened.t_ns >= low) and (high is None or happened.t_ns < high):
            emit(
                {
                    "name": happened.kind,
                    "cat": "event",
                    "ph": "i",
                    "s": "g",
                    "ts": ts(happened.t_ns),
                    "pid": HOST_PID,
                    "tid": 0,
                    "args": {"message": happened.message, **happened.data},
                }
            )
    other = {
        "producer": "gpuwhy",
        "recording": str(recording.path),
        "command": recorded_command(recording.meta),
        "start_ns": origin,
        "window_s": [None if t is None else (t - origin) / NS_PER_S for t in (low, high)],
        **plan.describe(),
    }
    out.write('\n],"displayTimeUnit":"ms","otherData":')
    out.write(json.dumps(other, ensure_ascii=False, default=str))
    out.write("}\n")
    return count


def _sample_counters(
    recording: Recording,
    low: int | None,
    high: int | None,
    counters: Counters,
    ts: Callable[[int], float],
) -> None:
    """Every sample in the window, a counter event where a value changed."""
    for sample in recording.gpu_samples(start_ns=low, end_ns=high):
        pid = GPU_PID_BASE + sample.device
        for field, name, unit, scale in GPU_COUNTERS:
            raw = getattr(sample, field)
            if raw is not None:
                counters.put(pid, name, unit, number(raw, scale), ts(sample.t_ns))
    for util in recording.util_samples(start_ns=low, end_ns=high):
        counters.put(
            GPU_PID_BASE + util.device,
            UTIL_NAMES[int(util.kind)],
            "%",
            util.value_pct,
            ts(util.t_ns),
        )
    for host in recording.host_samples(start_ns=low, end_ns=high):
        for field, name, unit, scale in HOST_COUNTERS:
            raw = getattr(host, field)
            if raw is not None:
                counters.put(HOST_PID, name, unit, number(raw, scale), ts(host.t_ns))


def _spans(
    recording: Recording,
    plan: TracePlan,
    emit: Callable[[dict[str, Any]], None],
    counters: Counters,
    ts: Callable[[int], float],
) -> set[int]:
    """Spans of the window as complete events (or phases and step/wait counters); the
    processes they belong to."""
    span_pids: set[int] = set()
    kinds = (None,) if plan.every_span else (SpanKind.PHASE,)
    for kind in kinds:
        for block in recording.span_columns(kind, plan.start_ns, plan.end_ns):
            pid = UNKNOWN_JOB_PID if block.pid is None else block.pid
            span_pids.add(pid)
            tid, category = _SPAN_TIDS[block.kind], block.kind.name.lower()
            for start, duration, step, steps in zip(
                block.start_ns, block.duration_ns, block.step, block.steps, strict=True
            ):
                span = Span(
                    block.phase, block.kind, start, start + duration, step, steps, block.pid
                )
                emit(
                    {
                        "name": _span_name(span),
                        "cat": category,
                        "ph": "X",
                        "ts": ts(start),
                        "dur": round(duration / 1000, 3),
                        "pid": pid,
                        "tid": tid,
                        "args": {"phase": span.phase, "step": step, "steps": steps},
                    }
                )
    if not plan.every_span:
        span_pids |= step_counters(recording, plan, counters, ts)
    return span_pids
