"""A recording as Chrome trace-event JSON, which ui.perfetto.dev and chrome://tracing open.

Layout: one process track per GPU and one for the host carry the counters ("ph": "C"); the
job's processes carry their phase, step and input-wait spans as complete events ("ph": "X", one
thread track per span kind so they nest); events are global instants ("ph": "i"). Times are µs
since the run's start. A counter is written only when its value changes (it is a step function,
so nothing is lost) plus once at the end: long recordings of slowly changing values stay small.
The file is streamed event by event: memory does not grow with the recording.

Track names: a counter event {"name": N, "args": {U: v}} shows in Perfetto as "N U" and in
chrome://tracing as counter N with series U, so N is the metric and U its unit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from gpuwhy.model import Span, SpanKind
from gpuwhy.recording.reader import Recording

# Pseudo process ids for the tracks that are not processes; above Linux's largest pid (2**22).
HOST_PID = 9_999_999
GPU_PID_BASE = 10_000_000
UNKNOWN_JOB_PID = 0  # spans whose process did not say who it was
_SPAN_TIDS = {SpanKind.PHASE: 1, SpanKind.STEP: 2, SpanKind.WAIT: 3}
_SPAN_THREADS = {1: "phases", 2: "steps", 3: "input waits"}
_MIB = 1 / (1 << 20)

# (GpuSample field, metric name, unit, scale)
GPU_COUNTERS: tuple[tuple[str, str, str, float], ...] = (
    ("util_gpu_pct", "GPU utilization", "%", 1),
    ("util_mem_pct", "memory busy", "%", 1),
    ("memory_used_bytes", "memory used", "MiB", _MIB),
    ("sm_clock_mhz", "SM clock", "MHz", 1),
    ("power_mw", "power", "W", 1e-3),
    ("temperature_c", "temperature", "°C", 1),
    ("pcie_tx_kbps", "PCIe TX", "KB/s", 1),
    ("pcie_rx_kbps", "PCIe RX", "KB/s", 1),
    ("pcie_gen", "PCIe link generation", "gen", 1),
    ("pcie_width", "PCIe link width", "lanes", 1),
    ("clock_event_reasons", "clock event reasons", "bitmask", 1),
    ("sm_active_permille", "SM active", "%", 0.1),
    ("sm_occupancy_permille", "SM occupancy", "%", 0.1),
    ("tensor_active_permille", "tensor active", "%", 0.1),
    ("dram_active_permille", "DRAM active", "%", 0.1),
    ("job_memory_bytes", "job memory", "MiB", _MIB),
    ("job_sm_pct", "job SM share", "%", 1),
)
HOST_COUNTERS: tuple[tuple[str, str, str, float], ...] = (
    ("cpu_system_pct", "system CPU", "%", 1),
    ("job_cpu_pct", "job CPU (100 = one core)", "%", 1),
    ("job_rss_bytes", "job resident memory", "MiB", _MIB),
    ("job_processes", "job processes", "count", 1),
    ("memory_available_bytes", "available memory", "MiB", _MIB),
)
UTIL_NAMES = {1: "GPU utilization (driver samples)", 2: "memory busy (driver samples)"}


class _Counters:
    """Writes a counter only when it changes; remembers the last value of every track."""

    def __init__(self, emit: Callable[[dict[str, Any]], None]) -> None:
        self._emit = emit
        self._last: dict[tuple[int, str], tuple[str, float]] = {}

    def put(self, pid: int, name: str, unit: str, value: float, ts_us: float) -> None:
        key = (pid, name)
        previous = self._last.get(key)
        if previous is not None and previous[1] == value:
            return
        self._last[key] = (unit, value)
        self._emit({"name": name, "ph": "C", "ts": ts_us, "pid": pid, "tid": 0,
                    "args": {unit: value}})

    def close(self, ts_us: float) -> None:
        """Repeat every track's last value at the end, so its final step has a width."""
        for (pid, name), (unit, value) in self._last.items():
            self._emit({"name": name, "ph": "C", "ts": ts_us, "pid": pid, "tid": 0,
                        "args": {unit: value}})


def _number(raw: float, scale: float) -> float:
    value = raw * scale
    return int(value) if scale == 1 and float(raw).is_integer() else round(value, 3)


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
    yield {"name": "process_name", "ph": "M", "pid": HOST_PID, "tid": 0,
           "args": {"name": "host"}}
    for device in recording.devices:
        pid = GPU_PID_BASE + device.index
        yield {"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
               "args": {"name": f"GPU {device.index}: {device.name}"}}
        yield {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
               "args": {"sort_index": device.index}}


def write_trace(recording: Recording, out: TextIO) -> int:
    """Write the whole trace to `out`, streamed; returns the number of trace events."""
    bounds = recording.time_range()
    start_ns = recording.meta.get("start_ns")
    candidates = [start_ns] if isinstance(start_ns, int) else []
    candidates += [bounds[0]] if bounds else []
    origin = min(candidates, default=0)  # nothing may land before 0
    count = 0
    first = True

    def emit(event: dict[str, Any]) -> None:
        nonlocal count, first
        out.write("" if first else ",\n")
        out.write(json.dumps(event, separators=(",", ":"), ensure_ascii=False, default=str))
        first = False
        count += 1

    def ts(t_ns: int) -> float:
        return round((t_ns - origin) / 1000, 3)

    out.write('{"traceEvents":[\n')
    for event in _metadata(recording):
        emit(event)
    counters = _Counters(emit)
    for sample in recording.gpu_samples():
        pid = GPU_PID_BASE + sample.device
        for field, name, unit, scale in GPU_COUNTERS:
            raw = getattr(sample, field)
            if raw is not None:
                counters.put(pid, name, unit, _number(raw, scale), ts(sample.t_ns))
    for util in recording.util_samples():
        counters.put(GPU_PID_BASE + util.device, UTIL_NAMES[int(util.kind)], "%",
                     util.value_pct, ts(util.t_ns))
    for host in recording.host_samples():
        for field, name, unit, scale in HOST_COUNTERS:
            raw = getattr(host, field)
            if raw is not None:
                counters.put(HOST_PID, name, unit, _number(raw, scale), ts(host.t_ns))
    if bounds is not None:
        counters.close(ts(bounds[1]))
    span_pids: set[int] = set()
    for span in recording.spans():
        pid = UNKNOWN_JOB_PID if span.pid is None else span.pid
        span_pids.add(pid)
        emit({"name": _span_name(span), "cat": span.kind.name.lower(), "ph": "X",
              "ts": ts(span.start_ns), "dur": round((span.end_ns - span.start_ns) / 1000, 3),
              "pid": pid, "tid": _SPAN_TIDS[span.kind],
              "args": {"phase": span.phase, "step": span.step, "steps": span.steps}})
    for pid in sorted(span_pids):
        label = "job (process unknown)" if pid == UNKNOWN_JOB_PID else f"job process {pid}"
        emit({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": label}})
        for tid, thread in _SPAN_THREADS.items():
            emit({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                  "args": {"name": thread}})
    for happened in recording.events():
        emit({"name": happened.kind, "cat": "event", "ph": "i", "s": "g",
              "ts": ts(happened.t_ns), "pid": HOST_PID, "tid": 0,
              "args": {"message": happened.message, **happened.data}})
    other = {"producer": "gpuwhy", "recording": str(recording.path),
             "command": recording.meta.get("command"), "start_ns": origin}
    out.write('\n],"displayTimeUnit":"ms","otherData":')
    out.write(json.dumps(other, ensure_ascii=False, default=str))
    out.write("}\n")
    return count
