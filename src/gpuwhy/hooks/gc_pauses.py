"""Full garbage collections, timed: a read that stalled on one is told apart from a slow input.

CPython collects its oldest generation when the objects that survived since the last full
collection reach a quarter of the long-lived ones (references.md#python-gc). In a process that
loaded a framework (hundreds of thousands of objects) one takes a tenth of a second or more,
holds the GIL throughout, and runs on whichever thread allocated at that moment: often inside
the read of the next batch, where it counts as data wait although no input is slow.

`install()` adds a `gc.callbacks` entry that times each full collection and emits it as an
Event ("gc": its start, `duration_ns`, `collected` objects, this process's `pid`). Younger
generations run thousands of times a second for microseconds each: the callback returns after
one lookup. Nothing here changes when or how the interpreter collects.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from gpuwhy.hooks import emitter
from gpuwhy.model import Event
from gpuwhy.wire import GC_EVENT

OLDEST_GENERATION = 2

_started_ns = 0  # the running full collection's start; the GIL lets only one run at a time


def _on_collection(phase: str, info: dict[str, Any]) -> None:
    global _started_ns
    try:
        if info.get("generation") != OLDEST_GENERATION:
            return
        now = time.monotonic_ns()
        if phase == "start":
            _started_ns = now
            return
        if not _started_ns:
            return
        start, _started_ns = _started_ns, 0
        emitter.emit(
            Event(
                t_ns=start,
                kind=GC_EVENT,
                message="full garbage collection",
                data={
                    "duration_ns": now - start,
                    "collected": info.get("collected", 0),
                    "pid": emitter.pid(),
                },
            )
        )
    except Exception:  # a callback that raises would be reported by the interpreter itself
        return


def install() -> None:
    """Time every full collection of this process from now on (idempotent)."""
    if _on_collection not in gc.callbacks:
        gc.callbacks.append(_on_collection)


def uninstall() -> None:
    """Stop timing collections."""
    global _started_ns
    while _on_collection in gc.callbacks:
        gc.callbacks.remove(_on_collection)
    _started_ns = 0
