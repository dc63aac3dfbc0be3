"""When a plain loop's dispatched step is done on the device, stamped without the loop waiting.

A JAX train step returns before the device has run it (asynchronous dispatch, on a GPU and on
the CPU alike), so the loop reads its next batch while the step still computes: only the part
of that read after the step finished kept the device waiting. attribution.py counts a read's
wait from `max(request, previous execution done)`; for a loop bounded by compiled train steps
(jax_steps.py) the "done" comes from here:

- the step's result is kept as a non-blocking readiness check for the reads that follow
  (`ThreadState.step_done`: idle at the request, the whole read waited; still busy at the delivery,
  none of it did);
- a step that the next read finds still running is handed to a daemon thread, which blocks on
  it (`block_until_ready`, which releases the GIL) and emits its DONE record when it is done.
  The stamp is taken once the thread holds the GIL again: late by at most the interpreter's
  switch interval (5 ms) while the loop runs Python, and only ever used for a read during which
  the step finished. Steps done by the next read, or followed by none (a loop over arrays in
  memory), cost the thread nothing.

The result watched is the step's last output (the loss, as `return params, opt_state, loss`
leaves it), not a buffer the next step may donate. A result that cannot be waited on (deleted)
gets no stamp: its reads then count in full, as before.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
from typing import Any

from gpuwhy.hooks import emitter, tracker
from gpuwhy.hooks.attribution import DONE

_STOP_WAIT_S = 2.0  # at exit, for the steps still running (all of them finish)
_DEPTH = 4  # how deep in nested outputs a result's last array is looked for

_queue: queue.SimpleQueue[tuple[int, Any] | None] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_lock = threading.Lock()


class OutputFinder:
    """Finds the first (or `last`) of a step function's outputs that has attribute `has`, in
    nested tuples, lists and dicts' values.

    A compiled step returns the same structure every call, so where the first result had it
    (its keys and indices) is tried first on the next: one call a step, not one per level and
    item searched. A result of another structure is searched again."""

    __slots__ = ("has", "last", "path")

    def __init__(self, has: str, *, last: bool = False) -> None:
        self.has = has
        self.last = last
        self.path: tuple[Any, ...] | None = None

    def __call__(self, result: Any) -> Any:
        path = self.path
        if path is not None:
            leaf = result
            try:
                for key in path:
                    leaf = leaf[key]
            except Exception:  # another structure
                pass
            else:
                if hasattr(leaf, self.has):
                    return leaf
        path = self.path = output_path(result, self.has, self.last)
        if path is None:
            return None
        for key in path:
            result = result[key]
        return result


def output_path(result: Any, has: str, last: bool, depth: int = 0) -> tuple[Any, ...] | None:
    """The keys and indices of the first (or last) output with attribute `has` (`OutputFinder`);
    None where none has it."""
    # Containers first: a failed attribute lookup (raising inside) costs more than the tests.
    if isinstance(result, dict):
        items: Any = result.items()
    elif isinstance(result, (list, tuple)):
        items = enumerate(result)
    else:
        return () if hasattr(result, has) else None
    if depth >= _DEPTH:
        return None
    for key, item in reversed(list(items)) if last else items:
        found = output_path(item, has, last, depth + 1)
        if found is not None:
            return (key, *found)
    return None


def last_array_finder() -> OutputFinder:
    """Finds the last JAX array among a step's outputs (a tuple's last item, a dict's last
    value): its loss, not a buffer the next step may donate."""
    return OutputFinder("block_until_ready", last=True)


def watch_jax(exec_id: int, array: Any) -> None:
    """Keep, for this thread's next reads, whether the execution `exec_id` (a closed step)
    that made `array` (its last, `last_array_finder`) is done; a DONE record will say when."""
    tracker.state().step_done = None if array is None else _Pending(exec_id, array)


class _Pending:
    """A dispatched step's readiness check (`ThreadState.step_done`). A read that finds the step
    still running hands it to the helper thread, whose DONE record the read's wait is counted
    from (attribution.py holds the read's step for it). A step done by the next read, or
    followed by none, costs the thread nothing."""

    __slots__ = ("array", "exec_id", "queued")

    def __init__(self, exec_id: int, array: Any) -> None:
        self.exec_id = exec_id
        self.array = array
        self.queued = False

    def __call__(self) -> bool:
        done = bool(self.array.is_ready())  # an error tells nothing: the caller's to catch
        if not done and not self.queued:  # the read may see it finish: its end is wanted
            self.queued = True
            _start()
            _queue.put((self.exec_id, self.array))
        return done


def _start() -> None:
    global _thread
    if _thread is not None:
        return
    with _lock:
        if _thread is None:
            thread = threading.Thread(target=_stamp_completions, name="gpuwhy-done", daemon=True)
            thread.start()
            # Registered now, after the framework's own exit handlers: runs before them.
            atexit.register(_stop)
            _thread = thread


def _stamp_completions() -> None:
    while True:
        item = _queue.get()
        if item is None:
            return
        exec_id, array = item
        try:
            array.block_until_ready()
        except Exception:  # deleted (donated), or the runtime is going: no stamp
            continue
        emitter.emit((DONE, exec_id, tracker.clock()))


def _stop() -> None:
    """At exit: stamp what is still running, then let the thread end before the runtime."""
    thread = _thread
    if thread is not None and thread.is_alive():
        _queue.put(None)
        thread.join(_STOP_WAIT_S)


def _forget_after_fork() -> None:
    global _queue, _thread
    _queue, _thread = queue.SimpleQueue(), None


os.register_at_fork(after_in_child=_forget_after_fork)
