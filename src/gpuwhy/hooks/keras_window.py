"""`gpuwhy run --profile` for Keras: the backend's own profiler over train batches.

The gpuwhy Keras callback calls `on_batch_begin` at each train batch's begin hook (on the
training thread, on every backend). Batch ``skip + 1`` starts the profiler and warms it up;
batches ``skip + 2 .. skip + 1 + steps`` are profiled, each inside a root step marker named
"train" with its number, which the trace readers take as the steps (XProf groups by the same
markers); the next batch's begin, or the fit's end, stops the profiler, which writes the trace:

- TensorFlow: `tf.profiler.experimental.start/stop`, markers `tf.profiler.experimental.Trace`
  (`_r=1`); an `.xplane.pb` under ``plugins/profile/<run>/``;
- JAX: `jax.profiler.start_trace/stop_trace`, markers `jax.profiler.StepTraceAnnotation`; the
  same layout;
- torch: `torch.profiler.profile`, markers `record_function("ProfilerStep#N")` (the name
  torch.profiler's own schedule gives a step); a Chrome trace per process.

An epoch's end closes the open marker (validation is not a train step). A fit that ends inside
the window writes what it profiled.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from gpuwhy.hooks import emitter, tracker
from gpuwhy.hooks.profile_window import Window, asked


class _Profiler:
    """One backend's profiler: start, a step marker, stop and write (returns the file)."""

    def start(self, directory: Path) -> None:
        raise NotImplementedError

    def marker(self, number: int) -> Any:
        raise NotImplementedError

    def stop(self, directory: Path) -> Path | None:
        raise NotImplementedError


class _TensorFlow(_Profiler):
    def start(self, directory: Path) -> None:
        import tensorflow as tf

        tf.profiler.experimental.start(str(directory))

    def marker(self, number: int) -> Any:
        import tensorflow as tf

        return tf.profiler.experimental.Trace("train", step_num=number, _r=1)

    def stop(self, directory: Path) -> Path | None:
        import tensorflow as tf

        tf.profiler.experimental.stop()
        return _newest(directory, "*.xplane.pb")


class _Jax(_Profiler):
    def start(self, directory: Path) -> None:
        import jax

        jax.profiler.start_trace(str(directory))

    def marker(self, number: int) -> Any:
        import jax

        return jax.profiler.StepTraceAnnotation("train", step_num=number)

    def stop(self, directory: Path) -> Path | None:
        import jax

        stop: Any = jax.profiler.stop_trace  # untyped in some jax releases
        stop()
        return _newest(directory, "*.xplane.pb")


class _Torch(_Profiler):
    def __init__(self) -> None:
        self.session: Any = None

    def start(self, directory: Path) -> None:
        import torch

        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self.session = torch.profiler.profile(activities=activities)
        self.session.start()

    def marker(self, number: int) -> Any:
        import torch

        return torch.profiler.record_function(f"ProfilerStep#{number}")

    def stop(self, directory: Path) -> Path | None:
        session, self.session = self.session, None
        if session is None:
            return None
        session.stop()
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"rank{os.environ.get('RANK', '0')}.pid{os.getpid()}.pt.trace.json"
        session.export_chrome_trace(str(path))
        return path


_PROFILERS: dict[str, type[_Profiler]] = {
    "tensorflow": _TensorFlow,
    "jax": _Jax,
    "torch": _Torch,
}


def _newest(directory: Path, pattern: str) -> Path | None:
    found = list(directory.rglob(pattern))
    return max(found, key=lambda path: path.stat().st_mtime_ns) if found else None


class KerasWindow(Window):
    """A window over Keras train batches (module doc)."""

    def __init__(self, skip: int, steps: int, directory: Path, profiler: _Profiler) -> None:
        super().__init__(skip, steps, directory)
        self.backend = profiler
        self.started = False
        self.open_marker: Any = None

    def on_batch_begin(self) -> None:
        """A train batch begins: the one before it (if any) ended."""
        if self.done:
            return
        self.seen += 1
        try:
            if not self.started:
                if self.seen == self.skip + 1 and self.claim():
                    self.backend.start(self.directory)
                    self.started = True  # this batch warms the profiler up
                return
            now = tracker.clock()
            self._end_marker()
            if self.active_start_ns is None:
                self.active_start_ns = now
            if self.active_steps >= self.steps:
                self._finish(now)
                return
            self.open_marker = self.backend.marker(self.active_steps + 1)
            self.open_marker.__enter__()
        except Exception as error:
            self._abandon(error)

    def pause(self) -> None:
        """An epoch ended: so did its last batch (validation is not a train step)."""
        if self.done or self.open_marker is None:
            return
        try:
            self._end_marker()
        except Exception as error:
            self._abandon(error)

    def close(self) -> None:
        """The fit ended, or the job exits: a window still open writes the steps it has."""
        if self.done or not self.started:
            return
        try:
            now = tracker.clock()
            self._end_marker()
            if self.active_steps:
                self._finish(now)
            else:
                self.done = True
                self._stop()
                self._not_written()
        except Exception as error:
            self._abandon(error)

    def _end_marker(self) -> None:
        marker, self.open_marker = self.open_marker, None
        if marker is not None:
            marker.__exit__(None, None, None)
            self.active_steps += 1

    def _finish(self, end_ns: int) -> None:
        self.done = True
        started = time.perf_counter()
        self.path = self.backend.stop(self.directory)
        self.export_s = time.perf_counter() - started
        if self.path is None:
            self._not_written()
            return
        self._emit(end_ns)

    def _stop(self) -> None:
        self.backend.stop(self.directory)


_window: list[KerasWindow | None] = []  # the process's window, once asked for


def window_for(backend: str) -> KerasWindow | None:
    """The process's Keras window if `gpuwhy run --profile` asked for one and `backend` has a
    profiler gpuwhy opens; the same one on every call."""
    if not _window:
        bounds = asked()
        profiler = _PROFILERS.get(backend)
        window = None if bounds is None or profiler is None else KerasWindow(*bounds, profiler())
        _window.append(window)
        if window is not None:
            emitter.on_exit(window.close)
    return _window[0]
