"""Worker processes for the analysis of a long recording: its GPUs lined up with its phases, and
the HTML page's GPU lanes, a share of the GPUs each, while this process does the rest.

Most of a long recording's report is Python decoding stored blocks, one core at a time: for a day
of eight GPUs, ~2.6 s to summarise every GPU over the 1,900 segments between phase boundaries
(alignment.py), ~0.8 s to read a million steps and ~1.1 s for their statistics (phases.py), and
~2.5 s to draw the page's timeline (report/html/timeline.py). The GPUs are independent of each
other and of the step statistics: once the phases' intervals are known, workers align the GPUs
while this process computes the statistics, and workers draw the GPUs' lanes while this process
draws the host's. On a machine with cores to spare, the report takes about as long as its
longest part (bench/scale.py).

Spawned, not forked: a forked child would inherit this process's open SQLite connection, which
SQLite forbids using across fork(), and forking a threaded process is unsafe. Each worker opens
the file read-only itself, so only a complete recording (its writer closed it) is read this way:
a live one could differ between two readers. Whatever goes wrong in a worker or in starting one
(no process support on the platform, a worker killed), the alignment is done here instead: the
report is the same either way, only slower.

`GPUWHY_WORKERS=N` sets how many workers (0 or 1: none), whatever the recording's size.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

from gpuwhy.analysis.alignment import GpuWindowStats, align_summaries
from gpuwhy.analysis.intervals import Interval
from gpuwhy.recording.reader import Recording

ENV_VAR = "GPUWHY_WORKERS"
# Below this many GPU samples the workers save little (docs/performance.md: 2 h of 8 GPUs,
# 576,000 samples, 0.45-0.51 s against 0.52 s alone for 0.2 s more CPU; 4 h, 0.65-0.70 s
# against 0.87 s): done here.
MIN_GPU_SAMPLES = 1_000_000
MAX_WORKERS = 8

Alignment = dict[str, dict[int, GpuWindowStats]]
T = TypeVar("T")


def worker_count(recording: Any, environ: Mapping[str, str] = os.environ) -> int:
    """How many workers to align `recording`'s GPUs with (0: none, align here). Only a complete
    recording of one file (not several nodes' merged) is read by workers."""
    if not isinstance(recording, Recording) or not recording.complete:
        return 0
    wanted = environ.get(ENV_VAR, "").strip()
    if not wanted:
        if recording.rows_at_most("gpu") < MIN_GPU_SAMPLES:
            return 0
        return min(_usable_cpus(), MAX_WORKERS)
    try:
        return min(int(wanted), MAX_WORKERS)
    except ValueError:
        return 0  # a bad value must not cost the report: align here


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on this platform
        return os.cpu_count() or 1


class Workers:
    """Spawned worker processes (`count` of them), or none when `count` < 2 or they cannot start.

    `submit` gives None where there are none; `results` gives None when a worker failed (the
    pool is then closed): the caller does the work itself in both cases.
    """

    def __init__(self, count: int) -> None:
        self.count = count if count >= 2 else 0
        self._pool: ProcessPoolExecutor | None = None
        if self.count:
            try:
                self._pool = ProcessPoolExecutor(
                    count,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_ignore_interrupts,
                )
                for _ in range(count):  # started now, while the caller reads on
                    self._pool.submit(_ready)
            except Exception:  # no process support here (no semaphores, say)
                self.close()

    def submit(self, function: Callable[..., T], *args: Any) -> Future[T] | None:
        if self._pool is None:
            return None
        try:
            return self._pool.submit(function, *args)
        except Exception:
            self.close()
            return None

    def results(self, futures: Sequence[Future[T] | None]) -> list[T] | None:
        if self._pool is None or any(future is None for future in futures):
            return None
        try:
            return [future.result() for future in futures if future is not None]
        except Exception:  # a worker failed, or its process was killed
            self.close()
            return None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self.count = 0


def shares(items: Sequence[T], count: int) -> list[list[T]]:
    """`items` dealt out to `count` workers (none left empty)."""
    return [list(items[k::count]) for k in range(count) if items[k::count]]


class Aligner:
    """`align_summaries` of a recording's GPUs, by `workers` when there are some.

    Create the workers first (they start while the spans are read), `start` the alignment
    with the windows, and take the `result` when needed.
    """

    def __init__(self, recording: Recording, workers: Workers) -> None:
        self._recording = recording
        self._workers = workers
        self._futures: list[Future[Alignment] | None] = []
        self._windows: Mapping[str, Sequence[Interval]] = {}

    def start(self, windows: Mapping[str, Sequence[Interval]]) -> None:
        """Align with `windows` (again: what was started before is dropped)."""
        self._windows = windows
        for future in self._futures:
            if future is not None:
                future.cancel()
        self._futures = []
        if not self._workers.count:
            return
        path = str(self._recording.path)
        for devices in shares(self._recording.sampled_devices(), self._workers.count):
            self._futures.append(self._workers.submit(align_devices, path, windows, devices))

    def result(self) -> Alignment:
        found = self._workers.results(self._futures) if self._futures else None
        if found is None:  # no workers, or one failed: the same work here, its errors included
            return align_summaries(self._windows, self._recording)
        merged: Alignment = {name: {} for name in self._windows}
        for part in found:
            for name, by_device in part.items():
                merged[name].update(by_device)
        return {name: dict(sorted(by_device.items())) for name, by_device in merged.items()}


def align_devices(
    path: str, windows: Mapping[str, Sequence[Interval]], devices: Sequence[int]
) -> Alignment:
    """In a worker: `align_summaries` of these GPUs of the recording at `path`."""
    found: Alignment = {name: {} for name in windows}
    with Recording.open(path) as recording:
        for device in devices:
            for name, by_device in align_summaries(windows, recording, device).items():
                found[name].update(by_device)
    return found


def _ready() -> None:
    """A worker's first task: started (and its imports done) while this process reads spans."""


def _ignore_interrupts() -> None:
    # Ctrl-C reaches the whole process group: the report handles it and shuts the workers down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
