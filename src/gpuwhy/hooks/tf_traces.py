"""`tf.function` retraces, timed: tracing again amid training is told apart from the steps.

TensorFlow traces a `tf.function` (runs its Python to build a graph) the first time it is called
with a new input signature, and only then: `tracing_compilation._create_concrete_function` is
reached on a miss of the function's cache (references.md#tf-function-retracing). Its first
trace falls on a phase's first step: warm-up (analysis/steady.py). A later one, a *retrace*,
comes from a new input shape (a smaller last batch) or from a Python value passed where a tensor
belongs (then every new value traces again): its time is not what a step costs, and a change
removes it.

The Python trace is only part of the cost: the call looks its graph up first, and the new graph
is optimised and instantiated on its first run. On a small `GradientTape` step called with a new
Python number each time, a call took 27 ms, 8 ms of it the Python trace. `install()` wraps that
function and the call that reaches it (`Function.__call__`, a `tf.function`'s): a call that
traced a function that had traced before emits an Event ("retrace": the call's start, its
`duration_ns`, the `function`'s name, `pid`); a trace nested in another (a `tf.function` called
while one traces) is part of it. The call also ran its step once (and, for Keras, pulled its
batch in the graph): the analysis takes the waits out (analysis/steady.py). Cost: a clock read
and two thread-local writes per call of a `tf.function`, microseconds beside its run; one event
per retrace, which takes milliseconds.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from gpuwhy.hooks import emitter, patching

_MODULE = "tensorflow.python.eager.polymorphic_function.tracing_compilation"
_TRACES = "_create_concrete_function"  # reached on a cache miss only
_FUNCTIONS = "tensorflow.python.eager.polymorphic_function.polymorphic_function"

# .tracing: traces under way; .calling: in a call; .traced: the name its trace gave
_thread = threading.local()
_traced: weakref.WeakSet[Any] = weakref.WeakSet()  # the tf.functions that traced once


def _timed_trace(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _create_concrete_function(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_thread, "tracing", 0)
        if depth == 0 and getattr(_thread, "traced", None) is None:
            options = args[3] if len(args) > 3 else kwargs.get("tracing_options")
            _thread.traced = str(getattr(options, "name", "") or "")
        _thread.tracing = depth + 1
        try:
            return original(*args, **kwargs)
        finally:
            _thread.tracing = depth

    return _create_concrete_function


def _timed_call(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def __call__(*args: Any, **kwargs: Any) -> Any:
        if getattr(_thread, "tracing", 0) or getattr(_thread, "calling", False):
            return original(*args, **kwargs)  # inside a trace or another call: theirs
        _thread.calling, _thread.traced = True, None  # (a trace outside any call is not timed)
        start_ns = time.monotonic_ns()
        try:
            return original(*args, **kwargs)
        finally:
            traced, _thread.traced, _thread.calling = getattr(_thread, "traced", None), None, False
            if traced is not None and args:
                _traced_again(args[0], start_ns, traced)

    return __call__


def _traced_again(function: Any, start_ns: int, name: str) -> None:
    """Emit the call that traced `function` unless it was its first trace (warm-up)."""
    end_ns = time.monotonic_ns()
    try:
        if function not in _traced:
            _traced.add(function)
            return
        emitter.retrace(start_ns, end_ns - start_ns, name, "tf.function traced again")
    except Exception:  # never into the job's call (a function that takes no weak reference)
        return


def install() -> None:
    """Time every `tf.function` call of this process that traces again, from now on."""
    module = sys.modules.get(_MODULE)
    function = getattr(sys.modules.get(_FUNCTIONS), "Function", None)
    if not callable(getattr(module, _TRACES, None)) or not callable(function):
        emitter.report_once("tf.traces", "tf.function traces not timed: module layout changed")
        return
    patching.patch(module, _TRACES, _timed_trace)
    patching.patch(function, "__call__", _timed_call)
