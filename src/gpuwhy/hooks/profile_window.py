"""`gpuwhy run --profile`: a short torch.profiler window inside the job, with no code change.

The optimizer-step hook counts steps; after ``skip`` of them (warm-up: compilation, cuDNN's
autotuning, the data loader's first workers) it starts `torch.profiler.profile` with one warm-up
step and ``steps`` active ones (CPU, and CUDA where a GPU is available; no stacks, shapes or
memory: they multiply the profiler's own cost), and writes the Chrome trace into the directory
`gpuwhy run` named, one file per process. Outside the window the hook costs one attribute check
per step. Anything that fails closes the window and is reported once; the training goes on.
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


class Window:
    """One profiling window over optimizer steps ``skip + 1 .. skip + steps``."""

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

    def on_step(self) -> None:
        if self.done:
            return
        self.seen += 1
        try:
            if self.profiler is None:
                if self.seen == self.skip:
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

        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self.profiler = torch.profiler.profile(
            activities=activities,
            schedule=torch.profiler.schedule(wait=0, warmup=1, active=self.steps, repeat=1),
            on_trace_ready=self._export,
        )
        self.profiler.start()

    def _export(self, profiler: Any) -> None:
        started = time.perf_counter()
        rank = os.environ.get("RANK", "0")
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"rank{rank}.pid{os.getpid()}.pt.trace.json"
        profiler.export_chrome_trace(str(path))
        self.export_s = time.perf_counter() - started
        self.path = path

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
            emitter.report_once(
                "profile", f"profiler window not written: the job ended after {self.seen} steps"
            )

    def _abandon(self, error: BaseException) -> None:
        self.done = True
        emitter.report_once("profile", f"profiler window abandoned: {error!r}")
        if self.profiler is not None:
            with contextlib.suppress(Exception):  # already stopped, or never started
                self.profiler.stop()


def from_environment(environ: Mapping[str, str] = os.environ) -> Window | None:
    """The window `gpuwhy run --profile` asked for, or None (unset or unreadable)."""
    value = environ.get(ENV_PROFILE)
    if not value:
        return None
    try:
        skip, steps, directory = value.split(":", 2)
        return Window(int(skip), int(steps), Path(directory))
    except ValueError:
        emitter.report_once("profile", f"{ENV_PROFILE}={value!r} not understood: no profiling")
        return None
