"""`gpuwhy.monitor()`: record a job from inside its own process, without `gpuwhy run`.

    with gpuwhy.monitor() as mon:
        model.fit(...)
    print(mon.path)        # then: gpuwhy report <path>

The sampler runs on a thread of this process (10 Hz by default, O(1) work per tick); spans from
the hooks (`gpuwhy.phase`, `gpuwhy.step`, the callbacks) go from the emitter's flusher thread
straight into the recording, with no socket in between.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from gpuwhy.model import Event, Span
from gpuwhy.redact import REDACTION_META, redact_command
from gpuwhy.runtime.paths import default_recording_path
from gpuwhy.runtime.session import Session
from gpuwhy.wire import ENV_SOCKET


class Monitor:
    """An in-process recording; a context manager (or call `start()`/`stop()` yourself)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        interval_s: float = 0.1,
        hooks: bool = True,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        if path is None:
            path = default_recording_path(sys.argv or ["python"])  # claimed until start()
        self.path = Path(path)
        self._clock = clock
        self.session = Session(self.path, interval_s=interval_s, job_pid=os.getpid(), clock=clock)
        self._emitter_connected = False
        self._hooks = hooks
        self._installed_hooks = False

    def start(self) -> Monitor:
        """Create the recording (RecordingError if the file exists) and start sampling."""
        self.session.open()
        self.session.set_meta("command", redact_command([sys.executable, *sys.argv]))
        self.session.set_meta(REDACTION_META, "on")
        self.session.set_meta("python", sys.executable)
        self.session.start()
        try:
            from gpuwhy.hooks import emitter

            emitter.configure(self._deliver)
            self._emitter_connected = True
            if self._hooks:
                from gpuwhy.hooks import auto

                # As under `gpuwhy run`: Keras, tf.data, DataLoader loops are seen unaided.
                self._installed_hooks = not auto.is_installed()
                auto.install()
        except Exception as error:  # without hooks the samples are still worth keeping
            self.session.put(
                Event(self._clock(), "hooks_unavailable", f"spans not recorded: {error!r}")
            )
        return self

    def stop(self, error: BaseException | None = None) -> None:
        """Deliver the spans still buffered, then finalise the recording. Idempotent."""
        if self._installed_hooks:
            self._installed_hooks = False
            with contextlib.suppress(Exception):
                from gpuwhy.hooks import auto

                auto.uninstall()
        if self._emitter_connected:
            self._emitter_connected = False
            try:
                from gpuwhy.hooks import emitter

                emitter.flush(1.0)
                # Inside `gpuwhy run`, hand the spans back to its socket; else stop keeping them.
                socket_path = os.environ.get(ENV_SOCKET)
                if not (socket_path and emitter.connect_socket(socket_path)):
                    emitter.configure(None)
            except Exception:
                pass
        if error is not None:
            message = f"{type(error).__name__}: {error}"
            self.session.put(Event(self._clock(), "exception", message[:500]))
        self.session.stop(exit_code=None)

    def _deliver(self, batch: Sequence[Span | Event]) -> None:
        for record in batch:
            self.session.put(record)

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop(exc)


def monitor(
    path: str | os.PathLike[str] | None = None, *, interval_s: float = 0.1, hooks: bool = True
) -> Monitor:
    """Record GPU and host use of this process into ``path`` (default: ``gpuwhy-runs/…``).

    Use as a context manager; the recording is complete when the block ends, whatever happened
    in it, and its path is ``.path``.
    """
    return Monitor(path, interval_s=interval_s, hooks=hooks)
