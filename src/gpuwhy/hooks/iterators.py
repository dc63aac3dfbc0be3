"""Timing of input pulls: one wrapper for every `__next__` gpuwhy hooks.

A pull is timed on the thread that asks for data: from the request to the item's return is time
the loop stood still for input. Nested hooked iterators (a torch DataLoader over a tf.data
dataset, Keras's iterator over either) are timed once, by the outermost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from gpuwhy.hooks import emitter, tracker
from gpuwhy.hooks.attribution import (
    BUSY_AT_DELIVERY,
    BUSY_AT_REQUEST,
    CHECKED,
    READY_AT_REQUEST,
    held_bits,
)

T = TypeVar("T")


def timed_next(
    next_fn: Callable[[Any], T],
    iterator: Any,
    *,
    force: bool = False,
    ready: Callable[[Any], bool] | None = None,
    handed_over: Callable[[Any, int], int | None] | None = None,
    waited: Callable[[Callable[[], T]], tuple[T, int]] | None = None,
) -> T:
    """`next_fn(iterator)`, timed as a pull of `iterator` (StopIteration passes through).

    `ready(iterator)`: whether its next item is already made (a worker's queue holds it), asked
    at the request: such a pull only hands a batch over, and waits only as `handed_over` says.
    `handed_over(iterator, took_ns)`: after a pull `ready` said was made, how long (ns) of the
    `took_ns` it took handing that batch over waited on the worker that made it
    (`worker_handover`); None where it first had to wait for another (a worker's batch out of
    order, or a worker's end of data): then the pull is timed whole.
    `waited(call)`: `call()` and how long (ns) it waited for input, where only a first part of
    the pull does (a multi-worker pull, whose agreement with the other workers follows): the
    wait is recorded from the request for that long.
    """
    st = tracker.state()
    if st.in_pull or (st.mute and not force):
        return next_fn(iterator)
    clock = tracker.clock
    done_check = st.step_done
    st.in_pull = True
    # The request's readiness check is asked here, not through `busy_bits`: one call fewer on
    # every pull, whose cost is mostly calls (docs/hooks.md, "Cost").
    at_request = 0
    if done_check is not None:
        try:
            at_request = FOUND_DONE if done_check() else FOUND_DONE | BUSY_AT_REQUEST
        except Exception:  # a readiness check that fails tells nothing
            at_request = 0
    busy = at_request if ready is None else at_request | _ready_bits(ready, iterator)
    request = clock()
    try:
        if waited is None:
            item = next_fn(iterator)
        else:
            item, waited_ns = waited(lambda: next_fn(iterator))
    except StopIteration:
        st.in_pull = False
        try:
            tracker.pull_in(st, iterator, request, clock(), False, force, 0)
        except Exception as error:
            _failed(error)
        raise
    except BaseException:
        st.in_pull = False
        raise
    delivery = clock() if waited is None else min(request + waited_ns, clock())
    st.in_pull = False
    # A step once done stays done: asked again only where the request did not find it done.
    if done_check is not None and at_request != FOUND_DONE:
        busy |= busy_bits(done_check, BUSY_AT_DELIVERY)
    if busy & READY_AT_REQUEST and handed_over is not None:
        held = _held(handed_over, iterator, delivery - request)
        if held is None:
            busy &= ~READY_AT_REQUEST  # it waited after all (or cannot tell): timed whole
        else:
            busy |= held_bits(held)
    try:
        tracker.pull_in(st, iterator, request, delivery, True, force, busy)
    except Exception as error:
        _failed(error)
    return item


FOUND_DONE = CHECKED
"""A request's readiness bits where the check found the step done (no BUSY_AT_REQUEST)."""


def busy_bits(done: Callable[[], bool] | None, bit: int) -> int:
    """`bit` (with CHECKED) if `done()` says the device is still running the step; 0 if it
    cannot tell (no check, or one that fails)."""
    if done is None:
        return 0
    try:
        return CHECKED | (0 if done() else bit)
    except Exception:  # a readiness check that fails tells nothing
        return 0


def _ready_bits(ready: Callable[[Any], bool], iterator: Any) -> int:
    """READY_AT_REQUEST (with CHECKED) if `ready(iterator)` says its next item is made; 0 if
    it cannot tell."""
    try:
        return CHECKED | (READY_AT_REQUEST if ready(iterator) else 0)
    except Exception:  # a check that fails tells nothing
        return 0


def _held(check: Callable[[Any, int], int | None], iterator: Any, took_ns: int) -> int | None:
    """`check(iterator, took_ns)`; None where it fails (it tells nothing)."""
    try:
        return check(iterator, took_ns)
    except Exception:
        return None


def loop_read_requested() -> tuple[int, int]:
    """A plain loop asks its own generator or iterator class for a batch (generator_pulls.py,
    legacy_reads.py, legacy_generator.py): (the request's time, whether the step before still
    runs on the device, as `busy_bits` says it)."""
    busy = busy_bits(tracker.state().step_done, BUSY_AT_REQUEST)
    return tracker.clock(), busy


def loop_read_delivered(request: int, busy: int) -> None:
    """That read gave its batch now: a wait of the open step (`tracker.generator_pull`)."""
    delivered = tracker.clock()
    if busy != FOUND_DONE:  # a step once done stays done
        busy |= busy_bits(tracker.state().step_done, BUSY_AT_DELIVERY)
    tracker.generator_pull(request, delivered, busy)


def _failed(error: Exception) -> None:
    """A pull's record failed: said once, never raised into the user's loop."""
    emitter.report_once("pull", f"input pull hook failed: {error!r}")


class TimedIterator:
    """Wraps an iterator so that each `next()` is a timed pull (used only inside framework
    loops, which define their steps)."""

    __slots__ = ("__weakref__", "_inner")

    def __init__(self, inner: Iterator[Any]) -> None:
        self._inner = inner

    def __iter__(self) -> TimedIterator:
        return self

    def __next__(self) -> Any:
        # The builtin `next` of the inner iterator: no Python call between. (A framework's loop
        # owns its steps, so the pull's source, here the inner iterator, is not asked.)
        return timed_next(next, self._inner, force=True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _next(timed: TimedIterator) -> Any:
    return next(timed._inner)


class LoaderIterator(TimedIterator):
    """The iterator a library's DataLoader wrapper gives the loop (Accelerate's, which pulls one
    batch ahead of it): timed at the loop's own pulls, like a DataLoader's, with the moment it
    was made (`tracker.CREATED_ATTR`: where its loop began)."""

    __slots__ = ("_gpuwhy_created_ns",)

    def __init__(self, inner: Iterator[Any], created_ns: int) -> None:
        super().__init__(inner)
        self._gpuwhy_created_ns = created_ns

    def __next__(self) -> Any:
        return timed_next(_next, self)


class TimedIterable:
    """An iterable whose iterators are `TimedIterator`s."""

    __slots__ = ("_inner",)

    def __init__(self, inner: Iterable[Any]) -> None:
        self._inner = inner

    def __iter__(self) -> TimedIterator:
        return TimedIterator(iter(self._inner))

    def __len__(self) -> int:
        return len(self._inner)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def timed(iterable: Iterable[Any]) -> Any:
    """`iterable` with timed pulls: a `TimedIterator` for an iterator, else a `TimedIterable`."""
    if isinstance(iterable, Iterator):
        return TimedIterator(iterable)
    return TimedIterable(iterable)
