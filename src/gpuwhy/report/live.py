"""The one live status line `gpuwhy run` keeps on stderr while the job runs on a terminal.

    gpuwhy 2:07 | GPU0 97% 10.3/79.6GiB | CPU 104% | 12.4 step/s | input wait 31% (input-bound)

Redrawn in place (carriage return, erase to end of line) about twice a second by a thread that
sleeps on an Event in between; erased when the job ends. The job shares the terminal, so a line
it prints may start after the status text: the next redraw moves to a fresh state, nothing is
captured or reordered. Nothing is drawn when stderr is not a terminal, with ``--quiet``, or on a
``TERM=dumb`` terminal.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from gpuwhy.model import DeviceInfo, GpuSample, HostSample
from gpuwhy.runtime.progress import Progress

REFRESH_S = 0.5

INPUT_BOUND_SHARE = 0.20
"""XProf's Input Pipeline Analyzer calls a job "HIGHLY input-bound" from 20 % of step time
waiting for input (xprof/convert/op_stats_to_input_pipeline_analysis.cc;
references.md#xprof-input-pipeline)."""

_CLEAR = "\r\x1b[K"
_GIB = 2**30


@dataclass(frozen=True)
class LiveState:
    """Everything one status line shows."""

    elapsed_s: float
    gpus: Sequence[GpuSample]
    host: HostSample | None
    progress: Progress | None


def live_enabled(stream: TextIO, *, quiet: bool, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether to draw: a terminal that can move the cursor, and the user did not ask for quiet."""
    if quiet or environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def format_line(state: LiveState, devices: Sequence[DeviceInfo], width: int) -> str:
    """The status text, cut to ``width`` characters (no control characters)."""
    totals = {device.index: device.memory_total_bytes for device in devices}
    minutes, seconds = divmod(int(state.elapsed_s), 60)
    hours, minutes = divmod(minutes, 60)
    clock = f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"
    parts = [f"gpuwhy {clock}"]
    for sample in sorted(state.gpus, key=lambda s: s.device):
        part = f"GPU{sample.device} "
        part += "-" if sample.util_gpu_pct is None else f"{sample.util_gpu_pct}%"
        used, total = sample.memory_used_bytes, totals.get(sample.device)
        if used is not None:
            part += f" {used / _GIB:.1f}" + (f"/{total / _GIB:.1f}GiB" if total else "GiB")
        parts.append(part)
    if not state.gpus:
        parts.append("no GPU sampled")
    if state.host is not None and state.host.job_cpu_pct is not None:
        parts.append(f"CPU {state.host.job_cpu_pct:.0f}%")
    progress = state.progress
    if progress is not None and progress.steps_per_s is not None:
        parts.append(f"{progress.steps_per_s:.1f} step/s")
    elif progress is not None and progress.steps_total:
        parts.append(f"{progress.steps_total} steps")
    if progress is not None and progress.wait_share is not None:
        wait = f"input wait {progress.wait_share:.0%}"
        if progress.wait_share >= INPUT_BOUND_SHARE:
            wait += " (input-bound)"
        parts.append(wait)
    line = " | ".join(parts)
    return line if len(line) <= width else line[: max(0, width - 1)] + "…"


StateReader = Callable[[], LiveState]


class LiveLine:
    """Draws `format_line` of ``read_state()`` on ``stream`` until `stop()`.

    Every failure to draw (a closed terminal after SIGHUP, a state that cannot be read) ends the
    line quietly: the status line is never worth an error in the job's terminal.
    """

    def __init__(
        self,
        stream: TextIO,
        read_state: StateReader,
        devices: Callable[[], Sequence[DeviceInfo]],
        *,
        refresh_s: float = REFRESH_S,
    ) -> None:
        self._stream = stream
        self._read_state = read_state
        self._devices = devices
        self._refresh_s = refresh_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._drawn = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="gpuwhy-live", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop redrawing and erase the line. Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
        with self._lock:
            if self._drawn:
                self._write(_CLEAR)
                self._drawn = False

    def _loop(self) -> None:
        while not self._stop.wait(self._refresh_s):
            try:
                line = format_line(self._read_state(), self._devices(), self._width())
            except Exception:
                return
            with self._lock:
                if self._stop.is_set() or not self._write(_CLEAR + line):
                    return
                self._drawn = True

    def _width(self) -> int:
        try:
            columns = os.get_terminal_size(self._stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            columns = 0
        # One column short of the edge: a full line would wrap on some terminals. A pty whose
        # size was never set reports 0 columns.
        return columns - 1 if columns > 1 else 79

    def _write(self, text: str) -> bool:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            return False
        return True


def state_reader(session: Any, clock: Callable[[], int] = time.monotonic_ns) -> StateReader:
    """Read a running `Session`: the sampler's newest readings and the hooks' progress."""

    def read() -> LiveState:
        sampler = session.sampler
        gpus: list[GpuSample] = []
        host = None
        if sampler is not None:
            snapshot = sampler.latest()
            gpus = list(snapshot.gpus.values())
            host = snapshot.host
        start = session.start_ns if session.start_ns is not None else clock()
        return LiveState(
            elapsed_s=max(0.0, (clock() - start) / 1e9),
            gpus=gpus,
            host=host,
            progress=session.steps.progress(clock()),
        )

    return read
