"""Pulls of a DataLoader with worker processes: whether the batch was made already when the loop
asked for it (then the pull only hands it over), and how long that hand-over still waited on
the worker that made it.

A queued batch is not yet the loop's. Its message is still being written by a thread of the
worker, and under torch's default sharing on Linux (`file_descriptor`) each tensor's file
descriptor comes from another thread of the worker (`multiprocessing.resource_sharer`), which
has to run to answer (references.md#torch-sharing-strategy). While the worker computes its next
batch in Python it holds its interpreter lock, and those threads wait for it, by the
interpreter's switch interval (5 ms, references.md#python-switch-interval) at a time: beside two
workers burning 30 ms of CPU a batch, a descriptor took a median 2.0 ms to arrive (0.44 ms with
free batches; 0.18 ms the quickest). A cheaper batch gives that wait back, but not a hand-over
slow because the worker slept, or because the machine was slow to wake the worker's thread
(another job's load). So the wait counted is the hand-over's time beyond the quickest hand-over
of the same iterator, where the main thread of the worker that made the batch is running or
ready to run as the pull ends (/proc/<pid>/stat, references.md#proc-pid-stat): it computes. It
becomes the pull's wait (`attribution.READY_AT_REQUEST`); where the state cannot be read, none
is counted.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from gpuwhy.hooks import patching

_RECEIVES_ATTR = "_gpuwhy_receives"
"""On a DataLoader iterator with workers: the results it received from its queue since its
pull's readiness check (`_counting_receives`)."""
_receives_counted: list[type] = []  # the iterator class whose `_get_data` counts them

_WORKER_ATTR = "_gpuwhy_handover_worker"
"""On a DataLoader iterator with workers: the pid of the worker that made the queued batch its
pull is taking (None if unknown, or no batch was queued)."""
_QUICKEST_ATTR = "_gpuwhy_quickest_handover_ns"
"""On a DataLoader iterator with workers: its quickest hand-over of a queued batch, the
hand-over's own cost (per iterator: another loader's batches may be smaller)."""


def install(workers: type) -> None:
    """Count `workers`'s (`_MultiProcessingDataLoaderIter`) receives from its result queue."""
    if "_get_data" in vars(workers):
        patching.patch(workers, "_get_data", _counting_receives)
        _receives_counted.append(workers)
        patching.on_undo(_receives_counted.clear)


def batch_ready(iterator: Any) -> bool:
    """Whether a DataLoader's workers already made the batch its next pull returns: received
    out of order and kept, or waiting in the result queue (torch's own bookkeeping; a change
    of it raises, and the pull is then timed whole). A result queued may be another batch, or
    a worker's end of data: `handover_wait` tells after the pull."""
    setattr(iterator, _WORKER_ATTR, None)
    counted = bool(_receives_counted) and isinstance(iterator, _receives_counted[0])
    if counted:
        setattr(iterator, _RECEIVES_ATTR, 0)
    info = iterator._task_info.get(iterator._rcvd_idx)
    if info is not None and len(info) == 2:  # (worker, data): kept from an earlier receive
        return True  # nothing left to hand over
    # Uncounted receives (torch's layout changed): whether a queued result is this batch is
    # unknown, and the pull is timed whole.
    if not counted or iterator._data_queue.empty():
        return False
    if info is not None:  # (worker,): still to receive, most likely the result queued
        setattr(iterator, _WORKER_ATTR, iterator._workers[info[0]].pid)
    return True


def handover_wait(iterator: Any, took_ns: int) -> int | None:
    """After a pull that took `took_ns` found its batch made: how long (ns) it waited on the
    worker that made it; None where the pull received more than that one result (it waited
    for a batch the queue did not hold yet: an IterableDataset's shorter shard ending, a
    slower worker's batch)."""
    if int(getattr(iterator, _RECEIVES_ATTR)) > 1:
        return None
    worker = getattr(iterator, _WORKER_ATTR, None)
    if worker is None:
        return 0
    quickest = min(took_ns, getattr(iterator, _QUICKEST_ATTR, took_ns))
    setattr(iterator, _QUICKEST_ATTR, quickest)
    held = took_ns - quickest
    return held if held and _computing(worker) else 0


def _computing(pid: int) -> bool:
    """Whether the main thread of process `pid` runs or waits only for a core (not asleep, not
    waiting for anything else); False if that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split(maxsplit=1)[0] == b"R"
    except (OSError, IndexError):
        return False


def _counting_receives(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`_MultiProcessingDataLoaderIter._get_data` (one result from the workers' queue: a batch
    or a worker's end of data) that counts its calls on the iterator."""

    @functools.wraps(original)
    def _get_data(self: Any) -> Any:
        setattr(self, _RECEIVES_ATTR, getattr(self, _RECEIVES_ATTR, 0) + 1)
        return original(self)

    return _get_data
