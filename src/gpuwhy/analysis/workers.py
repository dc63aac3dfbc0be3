"""Worker processes for the analysis of a long recording: its GPUs lined up with its phases, and
the HTML page's GPU lanes, a share of the GPUs each, while this process does the rest.

Most of a long recording's report is Python decoding stored blocks, one core at a time: for a day
of eight GPUs, ~2.6 s to summarise every GPU over the 1,900 segments between phase boundaries
(alignment.py), ~0.7 s to read a million steps and ~0.8 s for their statistics (phases.py), and
~2.5 s to draw the page's timeline (report/html/timeline.py). The GPUs are independent of each
other and of the step statistics: once the phases' intervals are known, workers align the GPUs
while this process computes the statistics, and workers draw the GPUs' lanes while this process
draws the host's. On a machine with cores to spare, the report takes about as long as its
longest part (bench/scale.py).

A job's nodes (recording/merged.py) are shared out the same way: each node's GPUs are read
from the node's own file, the windows moved onto its clock, and numbered as in the job.

Spawned, not forked: a forked child would inherit this process's open SQLite connection, which
SQLite forbids using across fork(), and forking a threaded process is unsafe. Each worker opens
the file read-only itself, so only a complete recording (its writer closed it) is read this way:
a live one could differ between two readers. Whatever goes wrong in a worker or in starting one
(no process support on the platform, a worker killed), its work is done here instead: the
report is the same either way, only slower.

`GPUWHY_WORKERS=N` sets how many workers (0: none), whatever the recording's size.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from gpuwhy.analysis.alignment import GpuWindowStats, align_summaries
from gpuwhy.analysis.intervals import Interval
from gpuwhy.cores import usable_cores
from gpuwhy.recording.merged import MergedRecording
from gpuwhy.recording.reader import Recording

ENV_VAR = "GPUWHY_WORKERS"
# Below this many GPU samples the workers save little for their CPU (docs/performance.md,
# "Scale": 2 h of 8 GPUs, 576,000 samples, about nothing for 0.2 s more CPU; 4 h, a fifth of
# the report's time): all done here.
MIN_GPU_SAMPLES = 1_000_000
MAX_WORKERS = 8

Alignment = dict[str, dict[int, GpuWindowStats]]
Ticket = tuple[int, int]  # (worker, number of the function sent to it)
T = TypeVar("T")


def worker_count(recording: Any, environ: Mapping[str, str] = os.environ) -> int:
    """How many workers to help with `recording`'s report (0: none, all done here): one per
    usable core up to one per GPU (at most MAX_WORKERS), for a long, complete recording (of
    one node or a job's nodes) on a machine of two cores or more."""
    parts = _parts(recording)
    if not parts or not recording.complete:
        return 0
    wanted = environ.get(ENV_VAR, "").strip()
    if wanted:
        try:
            return max(min(int(wanted), MAX_WORKERS), 0)
        except ValueError:
            return 0  # a bad value must not cost the report: all done here
    cpus = usable_cores() or 1
    if cpus < 2 or sum(node.rows_at_most("gpu") for node, _, _ in parts) < MIN_GPU_SAMPLES:
        return 0
    gpus = sum(len(node.sampled_devices()) for node, _, _ in parts)
    return min(cpus, MAX_WORKERS, max(gpus, 1))


def _parts(recording: Any) -> list[tuple[Recording, int, int]]:
    """The files a report reads, each as (recording, its clock's offset, its GPUs' index base):
    one, or a job's nodes (recording/merged.py); none for anything else."""
    if isinstance(recording, Recording):
        return [(recording, 0, 0)]
    if isinstance(recording, MergedRecording):
        return recording.parts()
    return []


class Workers:
    """Spawned worker processes (`count` of them), or none when `count` is 0 or they cannot start.

    Each worker runs the functions sent to it one after the other; `submit` sends one to the
    least loaded and gives a ticket for its answer (None where there are no workers), `results`
    gives the answers of tickets (None when a worker failed: they are then all stopped). The
    caller does the work itself in both cases. Workers are daemons, stopped when gpuwhy exits.
    """

    def __init__(self, count: int) -> None:
        self.count = max(count, 0)
        self._links: list[Connection] = []
        self._processes: list[BaseProcess] = []
        self._sent: list[int] = []  # per worker: functions sent, answers read
        self._answers: list[list[tuple[bool, Any]]] = []
        if not self.count:
            return
        try:
            with _interrupts_ignored():
                context = multiprocessing.get_context("spawn")
                for _ in range(self.count):
                    here, there = context.Pipe()
                    process = context.Process(target=_serve, args=(there,), daemon=True)
                    process.start()  # the interpreter starts now, while the caller reads on
                    there.close()
                    self._links.append(here)
                    self._processes.append(process)
                    self._sent.append(0)
                    self._answers.append([])
        except Exception:  # no process support here
            self.close()

    def submit(self, function: Callable[..., Any], *args: Any) -> Ticket | None:
        if not self.count:
            return None
        worker = min(range(self.count), key=lambda k: self._sent[k] - len(self._answers[k]))
        try:
            self._links[worker].send((function, args))
        except Exception:  # the worker is gone (killed), or the arguments do not pickle
            self.close()
            return None
        self._sent[worker] += 1
        return worker, self._sent[worker] - 1

    def results(self, tickets: Sequence[Ticket | None]) -> list[Any] | None:
        if not self.count or any(ticket is None for ticket in tickets):
            return None
        found = []
        try:
            for worker, number in (t for t in tickets if t is not None):
                answers = self._answers[worker]
                while len(answers) <= number:  # answers come in the order sent
                    answers.append(self._links[worker].recv())
                found.append(answers[number])
        except Exception:  # the worker died (killed, out of memory)
            self.close()
            return None
        if not all(ok for ok, _ in found):  # its reason is of no use: the work is redone here
            self.close()
            return None
        return [value for _, value in found]

    def close(self) -> None:
        """Let the workers go; those still working are stopped at once, their results no longer
        wanted (an interrupted report, the partners of a worker that failed)."""
        for worker, (link, process) in enumerate(zip(self._links, self._processes, strict=True)):
            try:
                if self._sent[worker] > len(self._answers[worker]):
                    process.terminate()
                else:
                    link.send(None)
                link.close()
            except Exception:
                process.terminate()
        self._links, self._processes = [], []
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
        self._tickets: list[Ticket | None] = []
        self._windows: Mapping[str, Sequence[Interval]] = {}

    def start(self, windows: Mapping[str, Sequence[Interval]]) -> None:
        """Align with `windows` (again: what was started before is dropped)."""
        self._windows = windows
        self._tickets = []  # answers to what was sent before are read and dropped
        if not self._workers.count:
            return
        gpus = [
            (str(node.path), offset, base, device)
            for node, offset, base in _parts(self._recording)
            for device in node.sampled_devices()
        ]
        for share in shares(gpus, self._workers.count):
            self._tickets.append(self._workers.submit(align_gpus, windows, share))

    def result(self) -> Alignment:
        found = self._workers.results(self._tickets) if self._tickets else None
        if found is None:  # no workers, or one failed: the same work here, its errors included
            return align_summaries(self._windows, self._recording)
        merged: Alignment = {name: {} for name in self._windows}
        for part in found:
            for name, by_device in part.items():
                merged[name].update(by_device)
        return {name: dict(sorted(by_device.items())) for name, by_device in merged.items()}


def align_gpus(
    windows: Mapping[str, Sequence[Interval]], gpus: Sequence[tuple[str, int, int, int]]
) -> Alignment:
    """In a worker: `align_summaries` of these GPUs, each (file, its clock's offset to the
    windows' clock, the job's index of the file's GPU 0, the GPU in the file): a node's GPU
    read on its own clock, numbered as in the job (recording/merged.py)."""
    found: Alignment = {name: {} for name in windows}
    for path, group in itertools.groupby(gpus, key=lambda gpu: gpu[0]):
        members = list(group)
        offset, base = members[0][1], members[0][2]
        local = {
            name: [(start - offset, end - offset) for start, end in intervals]
            for name, intervals in windows.items()
        }
        with Recording.open(path) as recording:
            for *_, device in members:
                for name, by_device in align_summaries(local, recording, device).items():
                    found[name].update(
                        (index + base, replace(stats, device=index + base))
                        for index, stats in by_device.items()
                    )
    return found


@contextlib.contextmanager
def _interrupts_ignored() -> Iterator[None]:
    """Ctrl-C ignored while workers start, so that they ignore it from their first instruction
    (an ignored signal stays ignored in a started program, and Python leaves it so): it reaches
    the whole process group, and the report handles it and stops them, where a worker still
    starting would print a traceback. A Ctrl-C in those few milliseconds (0.3-6 ms a worker)
    is lost. Only the main thread may set a signal's handling."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _serve(link: Connection) -> None:
    """A worker: run each (function, arguments) received, send back (True, result) or (False,
    the error), until told to stop (None) or its caller is gone."""
    while True:
        try:
            task = link.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        function, args = task
        try:
            answer: tuple[bool, Any] = (True, function(*args))
        except Exception as error:
            answer = (False, f"{type(error).__name__}: {error}")
        try:
            link.send(answer)
        except (BrokenPipeError, OSError):
            return
