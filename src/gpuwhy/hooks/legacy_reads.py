"""A plain loop's input before Python 3.12, which has no `sys.monitoring`
(generator_pulls.py runs the search and says what it found).

- The search: for its few steps, a profile function on the loop's thread alone
  (`sys.setprofile`) sees each Python call and generator resume there, then is removed. A
  profiler the job set itself is left alone: no search.
- An iterator class the loop reads (a hand-written loader): the class's `__next__` is replaced
  by one that times the calls the loop makes, in its thread and from its code, as reads of the
  open step; undone with the other patches (`gpuwhy.hooks.uninstall()`).
- A generator the loop reads can only be watched by a callback on every call of the thread:
  legacy_generator.py keeps one where a trial shows it costs little, else says why not.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from gpuwhy.hooks import emitter, patching
from gpuwhy.hooks.iterators import loop_read_delivered, loop_read_requested

_search: object | None = None  # the running search's token (a stale profile removes itself)


def start_search(seen: Callable[[CodeType, FrameType], bool]) -> bool:
    """Profile this thread: `seen(code, frame)` for each Python call or resume in it, until it
    answers True or `stop_search()`; False (nothing started) where a profiler is set."""
    global _search
    if sys.getprofile() is not None:
        return False
    token = _search = object()
    getprofile, setprofile = sys.getprofile, sys.setprofile  # held: at exit `sys` may be gone

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        if token is not _search:  # ended (at exit `_search` may read None: it ends too)
            if getprofile() is profile:
                setprofile(None)
            return
        try:
            done = seen(frame.f_code, frame)
        except Exception as error:  # never into the user's loop
            emitter.report_once("generator", f"generator search failed: {error!r}")
            done = True
        if done and getprofile() is profile:
            setprofile(None)

    sys.setprofile(profile)
    return True


def stop_search() -> None:
    """End the search (its profile function goes with its thread's next call)."""
    global _search
    _search = None


def time_class_reads(frame: FrameType, loop: CodeType) -> bool:
    """Time the reads of the iterator class whose `__next__` runs in `frame`, when `loop` (the
    loop's code) asks for them on this thread; False if that class cannot be found."""
    code = frame.f_code
    if not code.co_varnames:
        return False
    reader = frame.f_locals.get(code.co_varnames[0])  # `self`
    for owner in type(reader).__mro__:
        if getattr(vars(owner).get("__next__"), "__code__", None) is code:
            thread = threading.get_ident()
            make = functools.partial(_timed_next, loop=loop, thread=thread)
            return patching.patch(owner, "__next__", make)
    return False


def _timed_next(original: Callable[[Any], Any], *, loop: CodeType, thread: int) -> Any:
    @functools.wraps(original)
    def __next__(self: Any) -> Any:
        if threading.get_ident() != thread or sys._getframe(1).f_code is not loop:
            return original(self)
        request, busy = loop_read_requested()
        item = original(self)  # StopIteration, the data's end, passes untimed
        try:
            loop_read_delivered(request, busy)
        except Exception as error:  # never into the user's loop
            emitter.report_once("generator", f"loader read hook failed: {error!r}")
        return item

    return __next__
