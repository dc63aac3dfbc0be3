"""Sampler: one thread polls every source at a fixed period and hands records to a sink.

The period is kept by deadlines (start + k × interval) rather than by sleeping `interval` after
each tick, so ticks do not drift later by the tick's own duration; a tick that overruns skips
the deadlines it missed instead of bursting to catch up. Nothing here raises into the caller:
a source whose `read` fails is marked degraded, an `Event(kind="source_degraded")` goes to the
sink, and the other sources go on; a failing sink is counted. The thread measures its own CPU
time per tick (`stats`), which is what gpuwhy costs the machine to watch it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from gpuwhy.model import DeviceInfo, Event, GpuSample, HostSample, Record
from gpuwhy.telemetry.source import Snapshot, Source

_STOP_TIMEOUT_S = 5.0  # a source stuck in a driver call must not hang the caller's shutdown


@dataclass(frozen=True)
class SamplerStats:
    """What sampling has cost so far."""

    ticks: int = 0
    cpu_ns: int = 0  # CPU time of the sampler thread inside ticks
    busy_ns: int = 0  # wall time inside ticks
    late_ticks: int = 0  # deadlines skipped because a tick ran past them
    sink_errors: int = 0

    @property
    def cpu_per_tick_ns(self) -> float:
        return self.cpu_ns / self.ticks if self.ticks else 0.0


def _reason(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class Sampler:
    """Drives sources from one thread at a fixed period (see module doc)."""

    def __init__(
        self,
        sources: Sequence[Source],
        sink: Callable[[Record], None],
        *,
        interval_s: float = 0.1,
        clock: Callable[[], int] = time.monotonic_ns,
        thread_clock: Callable[[], int] = time.thread_time_ns,
    ) -> None:
        self.sources = list(sources)
        self.interval_s = interval_s
        self.degraded: dict[str, str] = {}  # source name -> why it stopped
        self.unavailable: dict[str, str] = {}  # source name -> why it was not started
        self.devices: list[DeviceInfo] = []
        self._sink = sink
        self._clock = clock
        self._thread_clock = thread_clock
        self._active: list[Source] = []
        self._opened: list[Source] = []
        self._pending: list[Event] = []  # events raised before the thread runs
        self._gpus: dict[int, GpuSample] = {}
        self._snapshot = Snapshot()
        self._stats = SamplerStats()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopped = False

    # ---- control (caller's thread) ----------------------------------------------------------

    def start(self) -> list[DeviceInfo]:
        """Open the available sources, start the thread; the devices they report on."""
        if self._thread is not None or self._stopped:
            return self.devices
        self.open_sources()
        self._thread = threading.Thread(target=self._run, name="gpuwhy-sampler", daemon=True)
        self._thread.start()
        return self.devices

    def open_sources(self) -> list[DeviceInfo]:
        """Open the sources without starting the thread (for `tick()`-driven use)."""
        if self._opened or self._active:
            return self.devices
        for source in self.sources:
            name = getattr(source, "name", type(source).__name__)
            try:
                if not source.available():
                    reason = getattr(source, "unavailable_reason", None)
                    self.unavailable[name] = str(reason or "not available on this machine")
                    continue
                self._opened.append(source)
                self.devices.extend(source.open())
            except Exception as error:
                self._degrade(source, error, self._clock())
                continue
            self._active.append(source)
        return self.devices

    def stop(self) -> None:
        """Stop the thread, hand on what the sources hold back, close them. Idempotent; never
        raises."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(_STOP_TIMEOUT_S)
            if self._thread.is_alive():  # stuck in a source: closing it under its feet is unsafe
                self.degraded.setdefault("sampler", "did not stop in time")
                return
        self._drain()
        for source in self._opened:
            with contextlib.suppress(Exception):
                source.close()

    def _drain(self) -> None:
        """Hand on what the sources hold back (NVML's buffered samples since their last fetch)."""
        now = self._clock()
        for source in self._active:
            drain = getattr(source, "drain", None)
            if drain is None:
                continue
            try:
                records = drain(now)
            except Exception:
                continue
            for record in records:
                self._emit(record)

    def latest(self) -> Snapshot:
        """The newest GPU sample per device and the newest host sample."""
        return self._snapshot

    @property
    def stats(self) -> SamplerStats:
        return self._stats

    # ---- sampler thread ---------------------------------------------------------------------

    def _run(self) -> None:
        interval_ns = max(int(self.interval_s * 1e9), 1)
        deadline = self._clock()
        while not self._stop.is_set():
            self.tick()
            deadline += interval_ns
            now = self._clock()
            if now >= deadline:  # overran: skip what was missed, keep the phase of the grid
                missed = (now - deadline) // interval_ns + 1
                deadline += missed * interval_ns
                self._stats = replace(self._stats, late_ticks=self._stats.late_ticks + missed)
            self._stop.wait((deadline - now) / 1e9)

    def tick(self) -> None:
        """Poll every healthy source once, now. Called by the thread (or directly, unstarted)."""
        now = self._clock()
        cpu_start = self._thread_clock()
        sink_errors = 0
        while self._pending:
            sink_errors += self._emit(self._pending.pop(0))
        host = self._snapshot.host
        for source in list(self._active):
            try:
                records = source.read(now)
            except Exception as error:
                self._degrade(source, error, now)
                while self._pending:
                    sink_errors += self._emit(self._pending.pop(0))
                continue
            for record in records:
                sink_errors += self._emit(record)
                if type(record) is GpuSample:
                    self._gpus[record.device] = record
                elif type(record) is HostSample:
                    host = record
        self._snapshot = Snapshot(t_ns=now, gpus=dict(self._gpus), host=host)
        stats = self._stats
        self._stats = SamplerStats(
            ticks=stats.ticks + 1,
            cpu_ns=stats.cpu_ns + self._thread_clock() - cpu_start,
            busy_ns=stats.busy_ns + self._clock() - now,
            late_ticks=stats.late_ticks,
            sink_errors=stats.sink_errors + sink_errors,
        )

    def _emit(self, record: Record) -> int:
        try:
            self._sink(record)
        except Exception:
            return 1
        return 0

    def _degrade(self, source: Source, error: BaseException, now: int) -> None:
        name = getattr(source, "name", type(source).__name__)
        reason = _reason(error)
        self.degraded[name] = reason
        if source in self._active:
            self._active.remove(source)
        self._pending.append(
            Event(
                t_ns=now,
                kind="source_degraded",
                message=f"telemetry source {name!r} stopped: {reason}",
                data={"source": name, "error": reason},
            )
        )
