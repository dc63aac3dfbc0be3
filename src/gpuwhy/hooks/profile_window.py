"""`gpuwhy run --profile`: a short profiler window inside the job, with no code change.

A window skips the job's first ``skip`` steps (warm-up: compilation, cuDNN's autotuning, the
data loader's first workers), lets one more step warm the profiler up, and profiles ``steps``
steps; then the trace is written into the directory `gpuwhy run` named and one event tells the
run where, over which steps, and at what cost to write. Outside the window a hook costs one
attribute check per step. Anything that fails closes the window and is reported once; the
training goes on.

`Window` holds what every window shares; `TorchWindow` (here) opens `torch.profiler` over
optimizer steps, `backend_window.BackendWindow` a backend's own profiler over Keras batches and
plain TensorFlow/JAX loops. Only one window opens in a process: the first to start claims it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuwhy.hooks import emitter, tracker
from gpuwhy.model import Event
from gpuwhy.wire import ENV_PROFILE, PROFILE_EVENT

_claimed: list[Window] = []  # the process's one window, once one started


class Window:
    """What a window shares: its bounds in steps, what it wrote, the event that says so."""

    def __init__(self, skip: int, steps: int, directory: Path) -> None:
        self.skip = skip
        self.steps = steps
        self.directory = directory
        self.seen = 0
        self.profiler: Any = None
        self.done = False
        self.active_start_ns: int | None = None
        self.active_steps = 0  # steps completed inside the window
        self.path: Path | None = None
        self.export_s: float | None = None

    def claim(self) -> bool:
        """Whether this window may start: no other one has in this process."""
        if _claimed and _claimed[0] is not self:
            self.done = True
            return False
        _claimed[:] = [self]
        return True

    def _emit(self, end_ns: int) -> None:
        emitter.emit(
            Event(
                end_ns,
                PROFILE_EVENT,
                f"profiled {self.active_steps} steps into {self.path}",
                {
                    "start_ns": self.active_start_ns,
                    "end_ns": end_ns,
                    "steps": self.active_steps,
                    "steps_asked": self.steps,
                    "skip": self.skip,
                    "path": str(self.path),
                    "export_s": round(self.export_s or 0.0, 3),
                },
            )
        )

    def _not_written(self) -> None:
        emitter.report_once(
            "profile", f"profiler window not written: the job ended after {self.seen} steps"
        )

    def _abandon(self, error: BaseException) -> None:
        self.done = True
        emitter.report_once("profile", f"profiler window abandoned: {error!r}")
        with contextlib.suppress(Exception):  # already stopped, or never started
            self._stop()

    def _stop(self) -> None:
        """Stop the profiler, whatever state it is in (may raise)."""


class TorchWindow(Window):
    """`torch.profiler` over optimizer steps ``skip + 2 .. skip + 1 + steps`` (step
    ``skip + 1`` is the profiler's warm-up, as its schedule has it)."""

    def on_step(self) -> None:
        if self.done:
            return
        self.seen += 1
        try:
            if self.profiler is None:
                if self.seen == self.skip and self.claim():
                    self._start()
                return
            self.profiler.step()
            if self.active_start_ns is None:
                self.active_start_ns = tracker.clock()  # the warm-up step just ended
                return
            self.active_steps += 1
            if self.path is not None:  # on_trace_ready ran: the last active step ended
                self.done = True
                self.profiler.stop()
                self._emit(tracker.clock())
        except Exception as error:
            self._abandon(error)

    def _start(self) -> None:
        import torch

        self.profiler = torch.profiler.profile(
            activities=torch_activities(),
            schedule=torch.profiler.schedule(wait=0, warmup=1, active=self.steps, repeat=1),
            on_trace_ready=self._export,
        )
        self.profiler.start()

    def _export(self, profiler: Any) -> None:
        started = time.perf_counter()
        path = torch_trace_path(self.directory)
        profiler.export_chrome_trace(str(path))
        self.export_s = time.perf_counter() - started
        self.path = path

    def close(self) -> None:
        """At the job's exit, a window still open: the steps it completed are kept (stopping the
        profiler writes them), or the job is said to have ended before any."""
        if self.profiler is None or self.done:
            return
        self.done = True
        end_ns = tracker.clock()
        with contextlib.suppress(Exception):
            self.profiler.stop()
        if self.path is not None and self.active_steps:
            self._emit(end_ns)
        else:
            self._not_written()

    def _stop(self) -> None:
        if self.profiler is not None:
            self.profiler.stop()


def torch_trace_path(directory: Path) -> Path:
    """Where a process writes its torch.profiler trace: one file per rank and process (the
    directory made if need be)."""
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"rank{os.environ.get('RANK', '0')}.pid{os.getpid()}.pt.trace.json"


def torch_activities() -> list[Any]:
    """What torch.profiler records: the CPU, and CUDA where a GPU is available (no stacks,
    shapes or memory: they multiply the profiler's own cost)."""
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return activities


def asked(environ: Mapping[str, str] = os.environ) -> tuple[int, int, Path] | None:
    """(skip, steps, directory) of the window `gpuwhy run --profile` asked for, or None (unset
    or unreadable: said once)."""
    value = environ.get(ENV_PROFILE)
    if not value:
        return None
    try:
        skip, steps, directory = value.split(":", 2)
        return int(skip), int(steps), Path(directory)
    except ValueError:
        emitter.report_once("profile", f"{ENV_PROFILE}={value!r} not understood: no profiling")
        return None


def from_environment(environ: Mapping[str, str] = os.environ) -> TorchWindow | None:
    """The torch window `gpuwhy run --profile` asked for, or None."""
    bounds = asked(environ)
    return None if bounds is None else TorchWindow(*bounds)
