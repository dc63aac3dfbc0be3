"""JAX recompilations, timed: a jitted function compiled again amid training is told apart.

`jax.jit` traces and compiles a function for each new combination of input shapes, dtypes and
static arguments, and caches the result (references.md#jax-jit-recompilation). A function's
first compile falls on a loop's first step: warm-up (analysis/steady.py). A later one comes
from a new shape (a smaller last batch) or a new static value: one-time work that a change
removes, as a `tf.function`'s retrace is (hooks/tf_traces.py).

JAX reports the stages of a compile through its public monitoring API
(`jax.monitoring.register_event_time_span_listener`): the trace to a jaxpr, its lowering to
MLIR and the backend's compile, each with the function's name and its start and end on the
wall clock. `install()` listens: the stages of one compile, from the first one's start to the
backend compile's end, become one Event ("retrace": `duration_ns`, `function`, `pid`), sent
only for a function whose name compiled before. The name is the identity JAX gives: two
jitted functions of one name count as one, so a step jitted anew in the loop (`jax.jit(step)`
each epoch, which compiles it anew) counts its compiles after the first. A trace nested in
another is not reported by JAX, and is part of the outer compile. Cost: nothing on a call that
finds its executable; a dictionary lookup and a clock read per stage of a compile, which takes
milliseconds.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Any

from gpuwhy.hooks import emitter, patching

TRACE_STAGES = frozenset(
    {"/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration"}
)
BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"  # a compile's last stage
_APIS = ("jit", "pmap")  # a compiled module's name: `jit(f)`, or `jit_f` in older JAX

_thread = threading.local()  # .started: the wall-clock start of the compile under way
_compiled: set[str] = set()  # functions of this process that compiled once
_listening = False


def _function_name(name: object) -> str:
    text = str(name or "")
    for api in _APIS:
        if text.startswith(f"{api}(") and text.endswith(")"):
            return text[len(api) + 1 : -1]
        if text.startswith(f"{api}_"):
            return text[len(api) + 1 :]
    return text


def _on_stage(event: str, start_s: float, end_s: float, **kwargs: Any) -> None:
    try:
        if event in TRACE_STAGES:
            started = getattr(_thread, "started", None)
            _thread.started = start_s if started is None else min(started, start_s)
            return
        if event != BACKEND_COMPILE:
            return
        started, _thread.started = getattr(_thread, "started", None), None
        begin_s = start_s if started is None else min(started, start_s)
        name = _function_name(kwargs.get("fun_name"))
        if name not in _compiled:
            _compiled.add(name)
            return
        to_monotonic = time.monotonic_ns() - time.time_ns()
        start_ns, duration_ns = round(begin_s * 1e9) + to_monotonic, round((end_s - begin_s) * 1e9)
        emitter.retrace(start_ns, duration_ns, name, "jitted function compiled again")
    except Exception:  # never into JAX's compile
        return


def install() -> None:
    """Listen to JAX's compile stages from now on (undone with every other patch)."""
    global _listening
    monitoring = getattr(sys.modules.get("jax"), "monitoring", None)
    register = getattr(monitoring, "register_event_time_span_listener", None)
    unregister = getattr(monitoring, "unregister_event_time_span_listener", None)
    if not callable(register) or not callable(unregister):
        emitter.report_once("jax.compiles", "JAX recompiles not timed: module layout changed")
        return
    if _listening:
        return
    register(_on_stage)
    _listening = True
    patching.on_undo(lambda: _stop(unregister))


def _stop(unregister: Any) -> None:
    global _listening
    _listening = False
    _compiled.clear()
    with contextlib.suppress(Exception):  # already gone
        unregister(_on_stage)
