"""The hand-written instrumentation: phases, steps and input waits for custom loops.

    with gpuwhy.phase("train"):
        for batch in gpuwhy.iterate(loader):   # each pull is a timed input wait
            with gpuwhy.step():                # or a plain `gpuwhy.step()` at the top
                train_step(batch)

Each call costs a clock read and an append; nothing formats, does I/O or syncs a device here.
Spans go wherever the emitter is connected (`gpuwhy run`, `gpuwhy.monitor()`); unconnected,
they are dropped at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import ContextDecorator
from types import TracebackType
from typing import Any

from gpuwhy.hooks import emitter, iterators, tracker


class phase(ContextDecorator):
    """A named phase: `with gpuwhy.phase("validation"): ...` (also a decorator).

    Phases nest; the innermost owns the time, so the phases of a thread never overlap.
    """

    def __init__(self, name: str) -> None:
        self.name = str(name)
        self._depth: list[int] = []

    def __enter__(self) -> phase:
        try:
            self._depth.append(tracker.push_phase(self.name, tracker.clock()))
        except Exception as error:
            emitter.report_once("phase", f"phase hook failed: {error!r}")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if self._depth:
                tracker.unwind(self._depth.pop(), tracker.clock())
        except Exception as error:
            emitter.report_once("phase", f"phase hook failed: {error!r}")


class step:
    """One training step. Either `with gpuwhy.step(): ...` or a plain `gpuwhy.step()` at the top
    of each iteration (it ends the previous step and begins the next; the last one ends with
    its phase or when the data runs out). Once used, it defines the steps of its thread.
    """

    __slots__ = ("_exec_id",)

    def __init__(self) -> None:
        self._exec_id: int | None = None
        try:
            tracker.state().manual = True
            self._exec_id = tracker.begin_step(tracker.clock())
        except Exception as error:
            emitter.report_once("step", f"step hook failed: {error!r}")

    def __enter__(self) -> step:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if self._exec_id is not None:
                tracker.end_step(tracker.clock(), self._exec_id)
        except Exception as error:
            emitter.report_once("step", f"step hook failed: {error!r}")


_WAIT_SOURCE = object()  # every `wait()` is a pull from one source: the loop's input


class wait:
    """Time spent waiting for input: `with gpuwhy.wait(): batch = next(loader_iter)`.

    The wait belongs to the current step (or, before any `gpuwhy.step()`, begins one).
    """

    __slots__ = ("_request",)

    def __init__(self) -> None:
        self._request = 0

    def __enter__(self) -> wait:
        tracker.state().in_pull = True  # a hooked iterator inside is not timed twice
        self._request = tracker.clock()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        delivered = tracker.clock()
        try:
            tracker.state().in_pull = False
            ok = kind is None
            if ok or kind is StopIteration:
                tracker.pull(_WAIT_SOURCE, self._request, delivered, ok, force=True)
        except Exception as error:
            emitter.report_once("wait", f"wait hook failed: {error!r}")


class iterate:
    """`iterable` with every pull timed as an input wait; each pull begins a step unless a
    framework or `gpuwhy.step()` defines them."""

    __slots__ = ("__weakref__", "_iterator")

    def __init__(self, iterable: Iterable[Any]) -> None:
        self._iterator: Iterator[Any] = iter(iterable)

    def __iter__(self) -> iterate:
        return self

    def __next__(self) -> Any:
        return iterators.timed_next(_advance, self)


def _advance(wrapper: iterate) -> Any:
    return next(wrapper._iterator)


def keras_callback_class() -> type:
    """`gpuwhy.KerasCallback`: imports Keras 3 (or tf.keras's tf_keras when selected)."""
    from gpuwhy.hooks import keras_hooks

    return keras_hooks.callback_class(_keras_callback_base())


def _keras_callback_base() -> type:
    import os
    import sys

    if os.environ.get("TF_USE_LEGACY_KERAS") == "1" and "keras" not in sys.modules:
        import tf_keras

        return tf_keras.callbacks.Callback  # type: ignore[no-any-return]
    import keras

    return keras.callbacks.Callback  # type: ignore[no-any-return]


def lightning_callback_class() -> type:
    """`gpuwhy.LightningCallback`: imports Lightning (`lightning` or `pytorch_lightning`)."""
    from gpuwhy.hooks import lightning_hooks

    return lightning_hooks.callback_class()
