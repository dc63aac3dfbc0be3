"""Steps of a plain JAX loop, seen through its compiled train step.

A JAX loop over a Python generator or NumPy batches pulls from nothing gpuwhy hooks, and JAX
has no optimizer object whose step could be seen. What every such loop does have is a compiled
step function (`jax.jit`, `jax.pmap`; `flax.nnx.jit` calls `jax.jit`) that takes gradients
while it is traced. So:

- `jax.jit` and `jax.pmap` hand back the compiled function wrapped in `Compiled`, which calls
  it unchanged and lends every attribute (`lower`, `trace`, `clear_cache`...) from it.
- `jax.grad`, `jax.value_and_grad` and `jax.vjp` note, when they run while a compiled function
  is being traced, that the outermost one trains.
- A call of a training function from the loop itself (not from inside another trace) is a
  step boundary at its return, as a torch optimizer step is (`tracker.boundary`): used only
  where nothing else (a framework loop, `gpuwhy.step()`, a hooked iterator) defines steps. The
  first call's tracing and compiling end before the first step begins. The call returns
  before the device ran it: when it is done is stamped apart (completion.py), so that the
  next step's reads wait only from then. Called inside a framework's loop (Keras's `fit` on
  JAX), which defines and times its own steps, it only notes that the process trains.
- A function that does not train, called `EVAL_CALLS` times or more between two train calls,
  is an evaluation: that span becomes a "validation" phase (`tracker.model_mode`), as a torch
  model's `.eval()` ... `.train()` does. A helper called once a step is not one.

Reads of the generator are timed by generator_pulls.py on Python 3.12 and later; before,
the steps have no data wait (wrap the batches in `gpuwhy.iterate` for it).
"""

from __future__ import annotations

import functools
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

from gpuwhy.hooks import completion, emitter, patching, tracker

EVAL_CALLS = 2
"""Calls of one non-training compiled function between two train calls that make the span an
evaluation: an evaluation loop runs its step once a batch, over several batches."""


class _Between:
    """What this thread's loop called since its last train call."""

    __slots__ = ("first_ns", "last_ns", "others", "trained")

    def __init__(self) -> None:
        self.trained = False  # a train call was seen: a later non-training loop evaluates
        self.first_ns = 0  # when the first non-training call since then began
        self.last_ns = 0  # when the last one returned
        self.others: dict[int, int] = {}  # id(Compiled) -> calls since the last train call


class _Thread(threading.local):
    """Each thread's own: the compiled functions being called (outermost first), and what its
    loop called since its last train call."""

    def __init__(self) -> None:
        self.stack: list[Compiled] = []
        self.between = _Between()


_local = _Thread()


class Compiled:
    """A compiled JAX function as the job sees it: called as it was, every attribute its own."""

    def __init__(self, compiled: Callable[..., Any]) -> None:
        self._gpuwhy_compiled = compiled
        self._gpuwhy_trains = False
        self._gpuwhy_last_array = completion.last_array_finder()
        functools.update_wrapper(self, compiled)
        self.__wrapped__ = getattr(compiled, "__wrapped__", compiled)  # the user's function

    def __getattr__(self, name: str) -> Any:  # only for what the instance does not have
        if name.startswith("_gpuwhy_"):  # not set yet (a copy being made): never recurse
            raise AttributeError(name)
        return getattr(self._gpuwhy_compiled, name)

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        """A compiled function set on a class is a method, as the original is."""
        return self if instance is None else types.MethodType(self, instance)

    def __repr__(self) -> str:
        return repr(self._gpuwhy_compiled)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        stack = _local.stack
        stack.append(self)
        # Traced inside another compiled function: no call of the loop. Called by a framework's
        # loop (Keras), which bounds and times its own steps: only whether it trains counts.
        outermost = len(stack) == 1
        own_step = outermost and not tracker.state().framework
        started = tracker.clock() if own_step else 0
        try:
            result = self._gpuwhy_compiled(*args, **kwargs)
        finally:
            stack.pop()
        if outermost:
            try:
                if own_step:
                    _called(self, started, tracker.clock(), result)
                elif self._gpuwhy_trains and tracker.awaiting_training:
                    tracker.trained()
            except Exception as error:  # never into the user's loop
                emitter.report_once("jax.steps", f"JAX step hook failed: {error!r}")
        return result


def _called(compiled: Compiled, started: int, ended: int, result: Any) -> None:
    between = _local.between
    if compiled._gpuwhy_trains:
        _evaluation_ends(between, started)
        between.trained = True
        tracker.trained()
        exec_id = tracker.boundary(ended, dispatched=True)
        if exec_id is not None:  # a step of a plain loop (a framework's own loop times itself)
            completion.watch_jax(exec_id, compiled._gpuwhy_last_array(result))
    elif between.trained:
        if not between.others:
            between.first_ns = started
        key = id(compiled)
        between.others[key] = between.others.get(key, 0) + 1
        between.last_ns = ended


def _evaluation_ends(between: _Between, t: int) -> None:
    """What ran since the last train call was an evaluation if one function ran often enough:
    a "validation" phase from its first call to `t`."""
    if between.others and max(between.others.values()) >= EVAL_CALLS:
        tracker.model_mode(False, between.first_ns)
        tracker.model_mode(True, t)
    between.others.clear()


def _at_exit(t: int) -> None:
    """An evaluation after the last train call ends with its last call."""
    between = _local.between
    if between.others:
        _evaluation_ends(between, between.last_ns)


def _note_gradient() -> None:
    stack = _local.stack
    if stack:
        stack[0]._gpuwhy_trains = True


def _compiling(original: Callable[..., Any]) -> Callable[..., Any]:
    """`jax.jit`/`jax.pmap`, also as a decorator factory (`jax.jit(static_argnums=...)`)."""

    @functools.wraps(original)
    def compile_(*args: Any, **kwargs: Any) -> Any:
        made = original(*args, **kwargs)
        if args or "fun" in kwargs:
            return _wrapped(args[0] if args else kwargs["fun"], made)

        @functools.wraps(made)
        def decorate(fun: Callable[..., Any]) -> Any:
            return _wrapped(fun, made(fun))

        return decorate

    return compile_


def _wrapped(fun: object, made: Any) -> Any:
    """JAX's own compiled helpers (`jax.nn`, `jax.scipy`... made on their first import) are
    nobody's loop: left as they are."""
    module = getattr(fun, "__module__", None) or ""
    if module.split(".", 1)[0] in ("jax", "jaxlib"):
        return made
    return Compiled(made)


def _gradient_transform(original: Callable[..., Any]) -> Callable[..., Any]:
    """`jax.grad`/`jax.value_and_grad`: the function they make notes that it runs."""

    @functools.wraps(original)
    def transform(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        made = original(fun, *args, **kwargs)

        @functools.wraps(made)
        def gradient(*call_args: Any, **call_kwargs: Any) -> Any:
            _note_gradient()
            return made(*call_args, **call_kwargs)

        return gradient

    return transform


def _gradient_call(original: Callable[..., Any]) -> Callable[..., Any]:
    """`jax.vjp`: notes that it runs."""

    @functools.wraps(original)
    def vjp(*args: Any, **kwargs: Any) -> Any:
        _note_gradient()
        return original(*args, **kwargs)

    return vjp


def install() -> None:
    """Wrap `jax.jit`/`jax.pmap` and the gradient entry points of the `jax` namespace."""
    jax = sys.modules.get("jax")
    names = ("jit", "pmap", "grad", "value_and_grad", "vjp")
    if jax is None or not all(callable(getattr(jax, name, None)) for name in names):
        emitter.report_once("jax.steps", "JAX steps not seen: module layout changed")
        return
    for name in ("jit", "pmap"):
        patching.patch(jax, name, _compiling)
    for name in ("grad", "value_and_grad"):
        patching.patch(jax, name, _gradient_transform)
    patching.patch(jax, "vjp", _gradient_call)
    if _at_exit not in tracker.before_finalize:
        tracker.before_finalize.append(_at_exit)


def uninstall() -> None:
    """Forget the exit hook and what this thread's loop called (the patches go with every
    other): a later `install()` starts afresh, and no later run ends an evaluation of this one."""
    global _local
    if _at_exit in tracker.before_finalize:
        tracker.before_finalize.remove(_at_exit)
    _local = _Thread()
