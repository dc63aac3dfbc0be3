"""`gpuwhy run --profile` with a backend's own profiler, over steps seen as they begin.

Two callers tell a window that a training step begins (so the one before it ended):

- the gpuwhy Keras callback, at each train batch's begin hook (on the training thread, on every
  backend);
- for a plain TensorFlow or JAX loop (`for batch in dataset:`, `gpuwhy.iterate`), the tracker
  as it closes each step of the "train" phase that no framework loop owns: in such a loop a
  step lasts from one pull to the next, so one closing is the next one beginning. An epoch's
  first step then holds what ran since the last pull of the epoch before.

Step ``skip + 1`` starts the profiler and warms it up; steps ``skip + 2 .. skip + 1 + steps``
are profiled, each inside a root step marker named "train" with its number, which the trace
readers take as the steps (XProf groups by the same markers); the next step's begin, or the
fit's end, stops the profiler, which writes the trace:

- TensorFlow: `tf.profiler.experimental.start/stop`, markers `tf.profiler.experimental.Trace`
  (`_r=1`); an `.xplane.pb` under ``plugins/profile/<run>/``;
- JAX: `jax.profiler.start_trace/stop_trace`, markers `jax.profiler.StepTraceAnnotation`; the
  same layout;
- torch (Keras on torch): `torch.profiler.profile`, markers `record_function("ProfilerStep#N")`
  (the name torch.profiler's own schedule gives a step); a Chrome trace per process.

A Keras epoch's end closes the open marker (validation is not a train step). A fit that ends
inside the window writes what it profiled.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gpuwhy.hooks import emitter, tracker
from gpuwhy.hooks.profile_window import Window, asked, torch_activities, torch_trace_path


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

        self.session = torch.profiler.profile(activities=torch_activities())
        self.session.start()

    def marker(self, number: int) -> Any:
        import torch

        return torch.profiler.record_function(f"ProfilerStep#{number}")

    def stop(self, directory: Path) -> Path | None:
        session, self.session = self.session, None
        if session is None:
            return None
        session.stop()
        path = torch_trace_path(directory)
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


class BackendWindow(Window):
    """A window over training steps, told of each as it begins (module doc)."""

    def __init__(self, skip: int, steps: int, directory: Path, profiler: _Profiler) -> None:
        super().__init__(skip, steps, directory)
        self.backend = profiler
        self.started = False
        self.open_marker: Any = None

    def on_batch_begin(self) -> None:
        """A training step begins: the one before it (if any) ended."""
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


_windows: dict[str, BackendWindow | None] = {}  # per backend, once asked for


def window_for(backend: str) -> BackendWindow | None:
    """The window `gpuwhy run --profile` asked for, with `backend`'s profiler (None where none
    was asked for, or gpuwhy opens no profiler of that backend); the same one on every call.
    Of several, the first to start claims the process (profile_window.Window.claim)."""
    if backend not in _windows:
        bounds = asked()
        profiler = _PROFILERS.get(backend)
        window = None if bounds is None or profiler is None else BackendWindow(*bounds, profiler())
        _windows[backend] = window
        if window is not None:
            emitter.on_exit(window.close)
    return _windows[backend]


def follow_plain_loops(backend: str) -> None:
    """Open the window over the steps of plain training loops (module doc), if one was asked
    for: at the close of each "train" step that no framework loop (Keras `fit`) owns."""
    window = window_for(backend)
    if window is None or backend in _following:
        return
    _following.add(backend)

    def on_step_closed(phase: str, steps: int, t: int) -> None:
        if phase == "train" and not tracker.state().framework:
            window.on_batch_begin()

    # JAX's first: a JAX job fed by tf.data computes in JAX, and its window claims the process.
    tracker.on_step_closed.insert(
        0 if backend == "jax" else len(tracker.on_step_closed), on_step_closed
    )


_following: set[str] = set()
