"""Keras's compiled step functions: when an execution's results exist, without waiting.

For the phase it is in, the Keras callback wraps the function Keras calls once per execution
(`train_function`, `test_function`, `predict_function`) and undoes it when the phase ends:

- TensorFlow runs synchronously: the moment the compiled loop returns is the execution's end,
  stamped as a DONE record (tighter than the batch-end hook, which runs after Python fetched
  the logs); the loop is called under `tfdata_wait.call_stamping`, so the pulls it traces are
  stamped in-graph, and the phase's data wait is measured where those stamps exist. tf_keras
  calls the function `make_*_function` made: that one is wrapped as it is made, for good;
- JAX and torch dispatch asynchronously: after each call a non-blocking readiness check of its
  results (`jax.Array.is_ready`, a CUDA event's `query`) is kept for the input pulls that
  follow (`tracker.ThreadState.step_done`). Nothing here waits for the device.
"""

from __future__ import annotations

import functools
import operator
import sys
import weakref
from collections.abc import Callable
from typing import Any

from gpuwhy.hooks import emitter, tfdata_wait, tracker
from gpuwhy.hooks.attribution import DONE, SRC_GRAPH
from gpuwhy.hooks.completion import OutputFinder

_stamped_loops: weakref.WeakSet[Any] = weakref.WeakSet()  # compiled loops traced with stamps
_checked_loops: weakref.WeakSet[Any] = weakref.WeakSet()  # traced under the wrapper: known

# Why a phase's wait is unknown (the report says it)
_COMPILED_BEFORE_HOOKS = "Keras's loop was compiled before gpuwhy's hooks were in place"
_NOT_HOOKED = "tf.data's iterators are not hooked in this process"


def watch(model: Any, name: str, backend: str) -> Callable[[], None] | None:
    """Instrument the compiled function of the phase, for the phase; returns the undo."""
    if backend == "tensorflow":
        return _stamp_returns(model, name)
    if backend in ("jax", "torch"):
        return _track_completion(model, name, backend)
    return None


def _track_completion(model: Any, name: str, backend: str) -> Callable[[], None] | None:
    """JAX and torch return before the device finished (asynchronous dispatch). After each
    call, keep a non-blocking readiness check of its results (`jax.Array.is_ready`, a CUDA
    event's `query`) for the input pulls that follow; nothing here waits for the device."""
    function = vars(model).get(name)  # an instance attribute: no property, no JAX state sync
    if not callable(function) or getattr(function, "_gpuwhy_inner", None) is not None:
        return None
    readiness: Callable[[Any], Callable[[], bool] | None]
    if backend == "jax":
        readiness, output = _jax_readiness, OutputFinder("is_ready")
    else:
        readiness, output = _torch_readiness, OutputFinder("is_cuda")

    def tracked(*args: Any, **kwargs: Any) -> Any:
        result = function(*args, **kwargs)
        st = None
        try:
            st = tracker.state()
            st.step_done = readiness(output(result))
        except Exception:  # never into the user's fit: the pulls then tell nothing
            if st is not None:
                st.step_done = None
        return result

    tracked._gpuwhy_inner = function  # type: ignore[attr-defined]
    setattr(model, name, tracked)

    def restore() -> None:
        if vars(model).get(name) is tracked:
            setattr(model, name, function)

    return restore


# The output's bound `is_ready`: nothing made per call, no Python call to get it (an output
# not found, None, raises AttributeError: the check is then None).
_jax_readiness = operator.attrgetter("is_ready")


def _torch_readiness(leaf: Any) -> Callable[[], bool] | None:
    if leaf is None or not leaf.is_cuda:
        return _always_done  # CPU tensors: the call returned when the work was done
    torch = sys.modules["torch"]
    event = torch.cuda.Event()
    event.record()  # enqueued after the execution's work; query() never blocks
    return event.query  # type: ignore[no-any-return]


def _always_done() -> bool:
    return True


def _stamp_returns(model: Any, name: str) -> Callable[[], None] | None:
    """On TensorFlow, stamp DONE when the compiled loop returns: the tightest end of an
    execution's compute (the batch-end hook runs only after Python unpacked and fetched the
    logs); and call it under `tfdata_wait.call_stamping`, so a trace of it stamps its pulls.

    - Keras 3: `train_function` calls a `tf.function` it closes over
      (`multi_step_on_iterator`); that call is wrapped for the phase and restored after it;
    - tf_keras: the function its loop calls is the one `make_*_function` returned, wrapped
      for good as it was made (`stamping_maker`: its evaluate holds on to the function
      before any callback runs).

    Sets the phase's data mode; returns the undo (a no-op for tf_keras), or None where the
    loop is not stamped here."""
    function = getattr(model, name, None)
    compiled = getattr(function, "_gpuwhy_inner", None)
    if compiled is not None and vars(model).get(name) is function:  # tf_keras, wrapped
        _set_mode_for(compiled)
        return _nothing_to_undo
    if name == "predict_function":
        return None  # Keras 3's predict pulls in Python before each call: timed there
    code = getattr(function, "__code__", None)
    if code is None or "multi_step_on_iterator" not in code.co_freevars:
        if not _a_loop(function):
            set_data_mode(0, "Keras's compiled loop is not the one gpuwhy knows")
        elif tfdata_wait.installed():  # tf_keras's, made before its make_* were wrapped
            set_data_mode(0, _COMPILED_BEFORE_HOOKS)
        else:  # the callback without the auto-instrumentation
            set_data_mode(0, _NOT_HOOKED)
        return None
    cell = function.__closure__[code.co_freevars.index("multi_step_on_iterator")]  # type: ignore[union-attr]
    compiled = cell.cell_contents
    if getattr(compiled, "_gpuwhy_inner", None) is not None:
        return None
    _set_mode_for(compiled)
    stamped = _stamped_loop(compiled)
    cell.cell_contents = stamped

    def restore() -> None:
        if cell.cell_contents is stamped:
            cell.cell_contents = compiled

    return restore


def stamping_maker(original: Callable[..., Any]) -> Callable[..., Any]:
    """tf_keras's `make_{train,test,predict}_function`, returning the function its loops call
    wrapped by `_stamped_loop` (a `tf.function`, or the plain function of `run_eagerly`;
    anything else, such as a cluster coordinator's scheduling lambda, as it was)."""

    @functools.wraps(original)
    def make(self: Any, *args: Any, **kwargs: Any) -> Any:
        function = original(self, *args, **kwargs)
        if getattr(function, "_gpuwhy_inner", None) is not None or not _a_loop(function):
            return function
        try:
            return _stamped_loop(function)
        except Exception as error:  # never into the user's fit
            emitter.report_once("tf_keras.loop", f"tf_keras loop not stamped: {error!r}")
            return function

    return make


def _a_loop(function: Any) -> bool:
    if callable(getattr(function, "experimental_get_tracing_count", None)):
        return True  # a tf.function
    return getattr(function, "__name__", "") in _LOOP_NAMES  # run eagerly


_LOOP_NAMES = ("train_function", "test_function", "predict_function")


def _set_mode_for(compiled: Any) -> None:
    """The phase's data mode, before its loop is called: measured where the loop is known to
    stamp, or is yet to be traced (or runs eagerly) with the pulls hooked."""
    hooked = tfdata_wait.installed()
    if compiled in _stamped_loops or (hooked and _tracing_count(compiled) <= 0):
        set_data_mode(SRC_GRAPH, None)
    elif not hooked:
        set_data_mode(0, _NOT_HOOKED)
    else:
        set_data_mode(0, _COMPILED_BEFORE_HOOKS)


def _stamped_loop(compiled: Any) -> Callable[..., Any]:
    """`compiled` called under the stamps, its return stamped DONE; the first call that
    traces it (or runs it eagerly) with the pulls hooked tells whether it stamps."""

    def stamped(*args: Any, **kwargs: Any) -> Any:
        if compiled in _checked_loops:
            result = tfdata_wait.call_stamping(compiled, *args, **kwargs)
        else:
            fresh = tfdata_wait.installed() and _tracing_count(compiled) <= 0
            made = tfdata_wait.made()
            result = tfdata_wait.call_stamping(compiled, *args, **kwargs)
            _checked_loops.add(compiled)  # traced now, or before: no later call is a first
            if fresh:
                _check_stamps(compiled, tfdata_wait.made() != made)
        step = tracker.state().step
        if step is not None:
            emitter.emit((DONE, step.exec_id, tracker.clock()))
        return result

    stamped._gpuwhy_inner = compiled  # type: ignore[attr-defined]
    return stamped


def _nothing_to_undo() -> None:
    pass


def _check_stamps(compiled: Any, made: bool) -> None:
    """After the first call of a loop traced (or run eagerly) under the stamps: note that it
    has them, or, if that call made none (a Keras that pulls some other way), that its phase's
    wait is unknown: no pulls will come."""
    try:
        if made:
            _stamped_loops.add(compiled)
        else:
            set_data_mode(0, "Keras's compiled loop pulls its batches some other way")
    except Exception as error:  # never into the user's loop
        emitter.report_once("keras.stamps", f"Keras stamps not checked: {error!r}")


def _tracing_count(compiled: Any) -> int:
    try:
        return int(compiled.experimental_get_tracing_count())
    except Exception:  # not a tf.function (`run_eagerly=True`): its pulls run eagerly
        return -1


def set_data_mode(mode: int, reason: str | None) -> None:
    """How the current phase measures its data wait (attribution's SRC_* bits; 0: it does
    not, and `reason` says why, once per phase and reason)."""
    st = tracker.state()
    phase = tracker.current_phase()
    if phase is None:
        return  # a peek before any phase (Keras building the model)
    st.data_modes[phase] = mode
    if reason is not None:
        emitter.report_once(
            f"data_wait:{phase}:{reason}",
            f"data wait of {phase!r} unknown: {reason}",
            kind="data_wait_unavailable",
            phase=phase,
            reason=reason,
        )
