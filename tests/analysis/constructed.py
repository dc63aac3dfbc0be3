"""CONSTRUCTED recordings: GPU samples and spans written by hand through the real RecordingWriter.

Every recording made here is constructed, not captured: the GPU samples imitate what NVML would
report for a described situation (a starved GPU, a throttled one...). They stand in for real GPU
recordings until those are captured on a GPU machine under tests/data/recordings/; the meta key
"provenance" of each file says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from gpuwhy.analysis.phases import PhaseStats, recording_phase_stats
from gpuwhy.model import (
    DeviceInfo,
    Event,
    GpuSample,
    HostSample,
    Span,
    SpanKind,
    UtilKind,
    UtilSample,
)
from gpuwhy.recording import Recording, RecordingWriter
from gpuwhy.recording.spancolumns import SpanColumns

S = 1_000_000_000
PROVENANCE = "constructed by tests/analysis/constructed.py (not a captured GPU recording)"

H100 = DeviceInfo(
    index=0,
    name="NVIDIA H100 80GB HBM3 (constructed)",
    uuid="GPU-constructed-0",
    memory_total_bytes=80 * 2**30,
    compute_capability=(9, 0),
    sm_clock_max_mhz=1980,
    pcie_gen_max=5,
    pcie_width_max=16,
)


def device(index: int, **changes: Any) -> DeviceInfo:
    """A constructed H100 with another index (and any field changed)."""
    fields = {**H100.__dict__, "index": index, "uuid": f"GPU-constructed-{index}", **changes}
    return DeviceInfo(**fields)


def ns(seconds: float) -> int:
    return round(seconds * S)


class Run:
    """A recording under construction; `close()` returns it opened for reading."""

    def __init__(
        self,
        path: Path,
        *,
        duration_s: float = 10.0,
        devices: Sequence[DeviceInfo] = (),
        command: Sequence[str] = ("python", "t.py"),
        environment: dict[str, Any] | None = None,
    ) -> None:
        self.path = path
        self.writer = RecordingWriter(path)
        self.writer.set_meta("provenance", PROVENANCE)
        self.writer.set_meta("start_ns", 0)
        self.writer.set_meta("end_ns", ns(duration_s))
        self.writer.set_meta("command", list(command))
        self.writer.set_meta("exit_code", 0)
        if environment is not None:
            self.writer.set_meta("environment", environment)
        if devices:
            self.writer.add_devices(list(devices))

    def phase(self, name: str, start_s: float, end_s: float) -> Run:
        self.writer.put(Span(name, SpanKind.PHASE, ns(start_s), ns(end_s)))
        return self

    def steps(
        self,
        phase: str,
        start_s: float,
        count: int,
        step_s: float,
        *,
        wait_s: float = 0.0,
        gap_s: float = 0.0,
        pid: int | None = None,
        per_span: int = 1,
        timed: bool = True,
    ) -> float:
        """`count` steps back to back: [wait][step][gap] each; returns the end time.

        Like the hooks, a timed step always has its WAIT (zero long when it did not wait);
        `timed=False` leaves it out: the input was not timed, the wait is unknown.
        """
        t = start_s
        for index in range(0, count, per_span):
            n = min(per_span, count - index)
            if timed:
                self.writer.put(
                    Span(
                        phase,
                        SpanKind.WAIT,
                        ns(t),
                        ns(t + wait_s * n),
                        step=index,
                        steps=n,
                        pid=pid,
                    )
                )
                t += wait_s * n
            self.writer.put(
                Span(phase, SpanKind.STEP, ns(t), ns(t + step_s * n), step=index, steps=n, pid=pid)
            )
            t += step_s * n + gap_s * n
        return t

    def gpu(
        self, dev: int, start_s: float, end_s: float, *, every_s: float = 0.1, **fields: Any
    ) -> Run:
        t = start_s
        while t < end_s - 1e-9:
            self.writer.put(GpuSample(ns(t), dev, **fields))
            t += every_s
        return self

    def util(
        self, dev: int, start_s: float, end_s: float, value: int, *, every_s: float = 1 / 6
    ) -> Run:
        t = start_s
        while t < end_s - 1e-9:
            self.writer.put(UtilSample(ns(t), dev, UtilKind.GPU, value))
            t += every_s
        return self

    def host(self, start_s: float, end_s: float, *, every_s: float = 0.5, **fields: Any) -> Run:
        t = start_s
        while t < end_s - 1e-9:
            self.writer.put(HostSample(ns(t), **fields))
            t += every_s
        return self

    def event(self, at_s: float, kind: str, message: str = "", **data: Any) -> Run:
        self.writer.put(Event(ns(at_s), kind, message, data))
        return self

    def close(self) -> Recording:
        self.writer.close()
        return Recording.open(self.path)


NO_GPU_ENV: dict[str, Any] = {
    "facts": {"schema_version": 1},
    "findings": [
        {
            "code": "NO_DRIVER",
            "severity": "error",
            "title": "No NVIDIA driver: every framework runs on the CPU",
            "evidence": {},
            "fix": "Install the NVIDIA driver.",
            "speedup": None,
            "speedup_method": None,
        }
    ],
}
GPU_OK_ENV: dict[str, Any] = {"facts": {"schema_version": 1}, "findings": []}


class SpanList:
    """Span records seen as a recording's span columns (one column block per span): the
    constructed spans of a test reach the analysis through its real entry point."""

    def __init__(self, spans: Iterable[Span]) -> None:
        self.spans = list(spans)

    def span_columns(self, kind: SpanKind | None = None) -> Iterator[SpanColumns]:
        for span in self.spans:
            if kind is None or span.kind is kind:
                yield SpanColumns(
                    span.kind,
                    span.phase,
                    span.pid,
                    [span.start_ns],
                    [span.end_ns - span.start_ns],
                    [span.step],
                    [span.steps],
                )


def phase_stats(
    spans: Iterable[Span],
    run_start_ns: int,
    run_end_ns: int,
) -> dict[str, PhaseStats]:
    """The phase statistics of constructed spans, through `recording_phase_stats`."""
    return recording_phase_stats(SpanList(spans), run_start_ns, run_end_ns)
