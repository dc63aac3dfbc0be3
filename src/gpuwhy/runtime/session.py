"""A recording session: a RecordingWriter fed by the Sampler and, for `run`, by the SpanListener.

`Session.open()` creates the recording (and the socket, with ``listen=True``) before the job
starts, so the job's environment can name the socket; `start(job_pid)` starts sampling once the
job's process exists. `stop()` finalises the recording whatever happened before it: each step is
guarded, so a failing sampler or listener never costs the data already written.
"""

from __future__ import annotations

import importlib
import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuwhy._version import __version__
from gpuwhy.model import DeviceInfo, Event, Record
from gpuwhy.runtime.listener import SpanListener
from gpuwhy.runtime.progress import StepMeter

if TYPE_CHECKING:
    from gpuwhy.recording.writer import RecordingWriter
    from gpuwhy.telemetry.sampler import Sampler
    from gpuwhy.telemetry.source import Source


def default_sources(job_pid: int | None) -> tuple[list[Source], dict[str, str]]:
    """The host and NVML sources, both following the job's process tree.

    Returns the sources and, by name, those that could not even be built (a broken install):
    one missing source never costs the others. The sampler opens only the sources that say
    they are available, so NVML without a driver costs one failed library load, once.
    """
    from gpuwhy.telemetry.job import JobTracker

    job = JobTracker(job_pid)
    sources: list[Source] = []
    broken: dict[str, str] = {}
    for name, module, attribute in (
        ("host", "gpuwhy.telemetry.host", "HostSource"),
        ("nvml", "gpuwhy.telemetry.nvml", "NvmlSource"),
    ):
        try:
            source_class = getattr(importlib.import_module(module), attribute)
            sources.append(source_class(job=job))
        except Exception as error:
            broken[name] = f"{type(error).__name__}: {error}"
    return sources, broken


class Session:
    """Record one job into a new recording at ``path``.

    ``sources`` replaces the default host + NVML sources (tests, replays); ``listen`` adds the
    Unix socket the job's hooks send spans to. Thread-safe where it matters: records arrive from
    the sampler and listener threads and go to the writer's non-blocking ``put``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        interval_s: float = 0.1,
        job_pid: int | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
        sources: Sequence[Source] | None = None,
        listen: bool = False,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.interval_s = interval_s
        self.job_pid = job_pid
        self._clock = clock
        self._wall_clock = wall_clock
        self._sources = list(sources) if sources is not None else None
        self._listen = listen
        self.writer: RecordingWriter | None = None
        self.sampler: Sampler | None = None
        self.listener: SpanListener | None = None
        self.steps = StepMeter(clock)
        self.devices: list[DeviceInfo] = []
        self.errors: list[str] = []  # problems met while recording, one line each
        self.start_ns: int | None = None
        self.end_ns: int | None = None
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        """Create the recording (RecordingError if the file exists) and, if asked, the socket."""
        if self.writer is not None:
            return
        from gpuwhy.recording.writer import RecordingWriter

        self.writer = RecordingWriter(self.path, clock=self._clock)
        self.start_ns = self._clock()
        for key, value in {
            "gpuwhy_version": __version__,
            "start_wall_s": self._wall_clock(),
            "start_ns": self.start_ns,
            "hostname": socket.gethostname(),
            "interval_s": self.interval_s,
        }.items():
            self.writer.set_meta(key, value)
        if self._listen:
            self.listener = SpanListener(self._from_job)
            try:
                self.listener.start()
            except OSError as error:  # no socket: the job runs without hooks, still recorded
                self.listener = None
                self._note("listener_failed", f"cannot listen for the job's hooks: {error}")

    def start(self, job_pid: int | None = None) -> list[DeviceInfo]:
        """Open if needed, then start sampling the job (``job_pid`` overrides the constructor's)."""
        self.open()
        if self.sampler is not None:
            return self.devices
        if job_pid is not None:
            self.job_pid = job_pid
        assert self.writer is not None
        try:
            from gpuwhy.telemetry.sampler import Sampler

            if self._sources is not None:
                sources = self._sources
            else:
                sources, broken = default_sources(self.job_pid)
                for name, reason in broken.items():
                    self._note("source_degraded", f"telemetry source {name!r} unusable: {reason}")
            self.sampler = Sampler(
                sources, self._from_sampler, interval_s=self.interval_s, clock=self._clock
            )
            self.devices = list(self.sampler.start())
            self.writer.add_devices(self.devices)
        except Exception as error:  # recording without samples beats stopping the job
            self._note("sampler_failed", f"sampling could not start: {error!r}")
        return self.devices

    def put(self, record: Record) -> None:
        """Add a record of gpuwhy's own (an event of the run) to the recording."""
        if self.writer is not None and not self._stopped:
            self.writer.put(record)

    def set_meta(self, key: str, value: Any) -> None:
        """Write one metadata value (JSON); ignored once stopped."""
        if self.writer is not None and not self._stopped:
            self.writer.set_meta(key, value)

    def stop_sampling(self) -> None:
        """Stop the sampler and the listener (draining what the job sent) and note the end time.

        Idempotent, never raises. Metadata can still be written until `stop()`.
        """
        if self.end_ns is not None or self.writer is None:
            return
        self.end_ns = self._clock()
        if self.sampler is not None:
            try:
                self.sampler.stop()
            except Exception as error:
                self.errors.append(f"sampler did not stop cleanly: {error!r}")
        if self.listener is not None:
            try:
                self.listener.stop()
            except Exception as error:
                self.errors.append(f"listener did not stop cleanly: {error!r}")

    def stop(self, exit_code: int | None = None) -> None:
        """Stop recording and finalise the recording. Idempotent, never raises.

        Problems met on the way are kept in ``errors`` (one line each) for the caller to show.
        """
        if self._stopped or self.writer is None:
            self._stopped = True
            return
        self.stop_sampling()
        writer = self.writer
        self._stopped = True
        try:
            writer.set_meta("end_ns", self.end_ns)
            writer.set_meta("exit_code", exit_code)
            writer.set_meta("dropped", writer.dropped)
            if self.listener is not None:
                stats = self.listener.stats
                writer.set_meta(
                    "hooks",
                    {
                        "connections": stats.connections,
                        "records": stats.records,
                        "malformed": stats.malformed,
                    },
                )
            if self.sampler is not None:
                writer.set_meta("degraded", dict(self.sampler.degraded))
                writer.set_meta("unavailable", dict(getattr(self.sampler, "unavailable", {})))
        except Exception as error:
            self.errors.append(f"could not write the run's metadata: {error!r}")
        try:
            writer.close()
        except Exception as error:
            self.errors.append(f"could not finalise the recording {self.path}: {error!r}")
        failure = getattr(writer, "error", None)  # a write that failed mid-run (disk full…)
        if failure:
            self.errors.append(f"the recording {self.path} stopped early: {failure}")

    def __enter__(self) -> Session:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals ---------------------------------------------------------------------------

    def _from_job(self, record: Record) -> None:
        assert self.writer is not None
        self.writer.put(record)
        self.steps.observe(record)

    def _from_sampler(self, record: Record) -> None:
        assert self.writer is not None
        self.writer.put(record)
        if type(record) is Event:  # which GPU a process holds: the live per-rank figures
            self.steps.observe(record)

    def _note(self, kind: str, message: str) -> None:
        self.errors.append(message)
        if self.writer is not None:
            self.writer.put(Event(t_ns=self._clock(), kind=kind, message=message))
