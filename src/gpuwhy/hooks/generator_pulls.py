"""Reads of a plain loop's own generator or iterator class, timed where nothing else times the
loop's input.

A loop over a Python generator of batches (`for x, y in batches(...):`), or over an object of
its own class with a `__next__`, pulls from nothing gpuwhy wraps: its steps are bounded by
torch optimizer steps or JAX compiled train steps (`tracker.boundary`) and their data wait is
unknown. On Python 3.12 and later, `sys.monitoring` can watch one function's code alone, so:

- once such a step ended with no timed pull, the generators the loop resumes are looked
  for: for ``SEARCH_STEPS`` steps (again later if none is found: ``RETRY_STEPS``), every
  `yield` and every start of a Python function in the process is seen (global events, a
  callback each), and those of the loop's thread are looked at. The loop's input is the first
  generator, or `__next__` method, not the frameworks' own, that such a frame (the loop, or a
  function around it, on the stack at the step boundary) resumed or called for its next item:
  by a `for` over it (directly or through `enumerate`, `zip`...) or by `next()` — not a
  generator expression a call consumes (`sum(p.numel() for p in ...)`);
- from then on only that code is watched (local events): each resume to the next `yield` (or
  its end), each `__next__` call to its return, in the loop's thread and from the same loop,
  is a read of the batch, a wait of the open step (`tracker.generator_pull`). A `__next__`
  that ends the data by raising StopIteration is not timed (an unwinding is no local event).
  Outer generators wrap inner ones (`tqdm(batches())`): the outer one, resumed by the loop,
  times them all. A few microseconds a read; code elsewhere runs unwatched.

Before Python 3.12 the search runs through the loop thread's profile function, an iterator
class found is timed by its own `__next__`, patched (legacy_reads.py), and a generator found by
a profile function on the loop's thread where a trial shows it costs at most 1 % of a step
(legacy_generator.py; else its phase's wait is reported unknown, with the cost and the fix).
Not found (the loop reads a list): nothing is watched, and the wait stays unknown, as before.
"""

from __future__ import annotations

import opcode
import os
import sys
import threading
from types import CodeType, FrameType
from typing import Any

from gpuwhy.hooks import emitter, input_pipelines, legacy_generator, legacy_reads, tracker
from gpuwhy.hooks.iterators import loop_read_delivered, loop_read_requested

SEARCH_STEPS = 3
"""Steps a search lasts; a loop that resumes no generator in that time reads none then."""

RETRY_STEPS = 8
"""Unfed steps after a search that found nothing before the next one, doubled after each
(at most ``MAX_RETRY_STEPS``): the loop may begin later (a few compiled steps called before
it, a first epoch over arrays)."""
MAX_RETRY_STEPS = 1024

# sys.monitoring's unassigned tool ids (0 debugger, 1 coverage, 2 profiler, 5 optimizer).
_TOOL_IDS = (4, 3)
_FRAMEWORKS = ("torch", "jax", "jaxlib", "flax", "optax", "gpuwhy")  # their code is no loop
_STACK_DEPTH = 64
_GENERATOR = 0x20  # inspect.CO_GENERATOR
_FOR_ITER, _CACHE = opcode.opmap["FOR_ITER"], opcode.opmap.get("CACHE", -1)  # (no CACHE: 3.10)
_CALLS = frozenset(opcode.opmap[n] for n in ("CALL", "CALL_FUNCTION") if n in opcode.opmap)


class _Watch:
    """The search's and the watch's state (one loop per process)."""

    def __init__(self) -> None:
        self.tool: int | None = None
        self.thread = 0  # the loop's thread
        self.searching = 0  # steps searched so far (0: no search running)
        self.wait = 0  # unfed steps still to come before the next search
        self.retry = RETRY_STEPS  # the wait after the next search that finds nothing
        self.done = False  # found, or unavailable
        self.around: set[CodeType] = set()  # code on the stack at the boundary (the search)
        self.excluded: tuple[str, ...] = ()  # the frameworks' folders (the search)
        self.loop: CodeType | None = None  # the code whose frame resumes the generator
        self.generator: CodeType | None = None  # the generator's or `__next__`'s code, watched
        # (id of the generator's frame, request, what the device-busy check said then)
        self.reading: tuple[int, int, int] | None = None


_watch = _Watch()


def install() -> None:
    """Look for a plain loop's generator once its steps show no timed read."""
    if _unfed_step not in tracker.on_unfed_step:
        tracker.on_unfed_step.append(_unfed_step)
    if legacy_generator.job_ended not in tracker.before_finalize:
        tracker.before_finalize.append(legacy_generator.job_ended)


def uninstall() -> None:
    """Stop looking and watching; a later `install()` starts afresh."""
    global _watch
    if _unfed_step in tracker.on_unfed_step:
        tracker.on_unfed_step.remove(_unfed_step)
    if legacy_generator.job_ended in tracker.before_finalize:
        tracker.before_finalize.remove(legacy_generator.job_ended)
    watch, _watch = _watch, _Watch()
    legacy_reads.stop_search()
    legacy_generator.stop()
    _release(watch)


def _unfed_step() -> None:
    """A step bounded by an optimizer or compiled step ended without a timed read."""
    watch = _watch
    if legacy_generator.trying():
        legacy_generator.on_boundary()
        return
    if watch.done:
        return
    if watch.searching:
        watch.searching += 1
        if watch.searching > SEARCH_STEPS:
            _stop_search(found=False)
            watch.wait, watch.retry = watch.retry, min(2 * watch.retry, MAX_RETRY_STEPS)
        return
    if watch.wait > 0:
        watch.wait -= 1
        return
    _start_search(sys._getframe(1))


def _start_search(frame: FrameType | None) -> None:
    watch = _watch
    if sys.version_info < (3, 12):  # no sys.monitoring: legacy_reads.py
        _note_around(watch, frame)
        watch.searching = 1
        if not legacy_reads.start_search(_legacy_seen):
            watch.searching, watch.done = 0, True  # the job's own profiler is set
        return
    monitoring = sys.monitoring
    for tool in _TOOL_IDS:
        try:
            monitoring.use_tool_id(tool, "gpuwhy")
        except ValueError:  # taken by another tool
            continue
        watch.tool = tool
        break
    else:
        watch.done = True  # another tool holds them: nothing to watch with
        return
    _note_around(watch, frame)
    watch.searching = 1
    events = monitoring.events
    monitoring.register_callback(watch.tool, events.PY_YIELD, _seen_yield)
    monitoring.register_callback(watch.tool, events.PY_START, _seen_start)
    monitoring.set_events(watch.tool, events.PY_YIELD | events.PY_START)


def _note_around(watch: _Watch, frame: FrameType | None) -> None:
    """The loop's thread, and the code on its stack at the step boundary (not the frameworks')."""
    excluded = watch.excluded = _framework_dirs()
    for _ in range(_STACK_DEPTH):
        if frame is None:
            break
        if not frame.f_code.co_filename.startswith(excluded):
            watch.around.add(frame.f_code)
        frame = frame.f_back
    watch.thread = threading.get_ident()


def _legacy_seen(code: CodeType, frame: FrameType) -> bool:
    """The legacy search (the loop thread's profile): a Python call or generator resume;
    True once the search is over."""
    watch = _watch
    if watch.searching == 0:
        return True
    if not (code.co_flags & _GENERATOR or code.co_name == "__next__"):
        return False
    if not _asked_by_loop(watch, code, frame.f_back):
        return False
    _stop_search(found=True, generator=code, frame=frame)
    return True


def _asked_by_loop(watch: _Watch, code: CodeType, back: FrameType | None) -> bool:
    """Whether `code` (a generator resumed, a `__next__` called) is none of the frameworks'
    and `back`, a frame around the step, asked it for its next item; if so it is the loop."""
    if code.co_filename.startswith(watch.excluded):
        return False
    if back is None or back.f_code not in watch.around or not _takes_next(back, code):
        return False
    watch.loop = back.f_code
    return True


def _framework_dirs() -> tuple[str, ...]:
    dirs = []
    for name in _FRAMEWORKS:
        path = getattr(sys.modules.get(name), "__file__", None)
        if path:
            dirs.append(os.path.dirname(path) + os.sep)
    return tuple(dirs) or (os.sep + "\0",)  # startswith(()) would be False: keep a tuple


def _seen_yield(code: CodeType, offset: int, value: object) -> Any:
    """Search: a `yield` anywhere. The loop's generator yields to a frame around the step."""
    if code.co_flags & _GENERATOR:
        _found_if_read(code)
    return None


def _seen_start(code: CodeType, offset: int) -> Any:
    """Search: a Python function starts. An iterator class's `__next__`, called by a frame
    around the step for its next item, is the loop's input."""
    if code.co_name == "__next__":
        _found_if_read(code)
    return None


def _found_if_read(code: CodeType) -> None:
    """While searching, in the loop's thread: found, if `code` (a generator yielding, a
    `__next__` starting: the frame two calls up, under its event's callback) is none of the
    frameworks' and a frame around the step asked it for its next item."""
    watch = _watch
    if watch.searching == 0 or threading.get_ident() != watch.thread:
        return
    try:
        if _asked_by_loop(watch, code, sys._getframe(2).f_back):
            _stop_search(found=True, generator=code)
    except Exception as error:  # never into the user's code
        emitter.report_once("generator", f"generator search failed: {error!r}")


def _takes_next(frame: FrameType, generator: CodeType) -> bool:
    """Whether `frame` resumed `generator` for its next item: its instruction now is a `for`
    (FOR_ITER; a specialised one stands on its inline cache) or a call of `next()`, not a
    call that consumes a generator expression."""
    code, at = frame.f_code.co_code, frame.f_lasti
    while 0 < at < len(code) and code[at] == _CACHE:
        at -= 2
    if not 0 <= at < len(code):
        return False
    return code[at] == _FOR_ITER or (code[at] in _CALLS and generator.co_name != "<genexpr>")


def _stop_search(
    *, found: bool, generator: CodeType | None = None, frame: FrameType | None = None
) -> None:
    watch = _watch
    if sys.version_info < (3, 12):
        watch.searching = 0
        watch.done = found
        watch.around = set()
        legacy_reads.stop_search()
        if found and generator is not None and frame is not None and watch.loop is not None:
            _watch_legacy(generator, frame, watch.loop)
            if not generator.co_flags & _GENERATOR:  # a generator's: once its watch is kept
                input_pipelines.loop_reads(generator, tracker.clock())
        return
    monitoring = sys.monitoring
    tool = watch.tool
    watch.searching = 0
    watch.done = found
    watch.around = set()
    if tool is None:
        return
    try:
        monitoring.set_events(tool, 0)
        monitoring.register_callback(tool, monitoring.events.PY_YIELD, None)
        monitoring.register_callback(tool, monitoring.events.PY_START, None)
        if not found or generator is None:
            _release(watch)
            return
        watch.generator = generator
        events = monitoring.events
        monitoring.register_callback(tool, events.PY_START, _resumed)
        monitoring.register_callback(tool, events.PY_RESUME, _resumed)
        monitoring.register_callback(tool, events.PY_YIELD, _delivered)
        monitoring.register_callback(tool, events.PY_RETURN, _delivered)
        monitoring.set_local_events(
            tool,
            generator,
            events.PY_START | events.PY_RESUME | events.PY_YIELD | events.PY_RETURN,
        )
        input_pipelines.loop_reads(generator, tracker.clock())
    except Exception as error:  # never into the user's loop
        emitter.report_once("generator", f"generator read hook failed: {error!r}")


def _watch_legacy(code: CodeType, frame: FrameType, loop: CodeType) -> None:
    """Before 3.12: time an iterator class's reads; try watching a generator's."""
    try:
        if code.co_flags & _GENERATOR:
            legacy_generator.start(code, loop)
        elif not legacy_reads.time_class_reads(frame, loop):
            emitter.report_once("generator", "the loop's loader class was not found")
    except Exception as error:  # never into the user's loop
        emitter.report_once("generator", f"loader read hook failed: {error!r}")


def _resumed(code: CodeType, offset: int) -> Any:
    """The loop asked its generator (or iterator) for the next batch (or started it)."""
    watch = _watch
    if threading.get_ident() != watch.thread:
        return None
    frame = sys._getframe(1)
    back = frame.f_back
    if back is not None and back.f_code is watch.loop:
        watch.reading = (id(frame), *loop_read_requested())
    return None


def _delivered(code: CodeType, offset: int, value: object) -> Any:
    """The generator (or `__next__`) gave the batch (or ended): the read is over."""
    watch = _watch
    reading = watch.reading
    if reading is None or threading.get_ident() != watch.thread:
        return None
    if reading[0] != id(sys._getframe(1)):
        return None  # a nested use of the same generator function
    watch.reading = None
    try:
        loop_read_delivered(reading[1], reading[2])
    except Exception as error:  # never into the user's loop
        emitter.report_once("generator", f"generator read hook failed: {error!r}")
    return None


def _release(watch: _Watch) -> None:
    """Watch nothing more and give the tool id back."""
    tool, watch.tool = watch.tool, None
    if tool is None or sys.version_info < (3, 12):
        return
    monitoring = sys.monitoring
    monitoring.set_events(tool, 0)
    if watch.generator is not None:
        monitoring.set_local_events(tool, watch.generator, 0)
    events = monitoring.events
    for event in (events.PY_START, events.PY_RESUME, events.PY_YIELD, events.PY_RETURN):
        monitoring.register_callback(tool, event, None)
    monitoring.free_tool_id(tool)


def _forget_after_fork() -> None:
    """A forked child (a loader worker) runs no loop of its own: nothing is watched there."""
    global _watch
    watch, _watch = _watch, _Watch()
    _watch.done = True
    legacy_reads.stop_search()
    legacy_generator.stop()
    try:
        _release(watch)
    except Exception as error:  # never into the child's start
        emitter.report_once("generator", f"generator read hook failed: {error!r}")


os.register_at_fork(after_in_child=_forget_after_fork)
