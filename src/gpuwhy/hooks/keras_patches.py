"""Keras patches: the gpuwhy callback in every fit/evaluate/predict, and input timing.

`install(keras)` patches `Model.fit/evaluate/predict` of Keras 3 (or tf_keras) to put one gpuwhy
callback first in the callback list (never twice; evaluate inside fit reuses fit's), and the
input pulls of the backend Keras runs on so they are timed: in-graph on TensorFlow
(`tfdata_wait`, armed by keras_functions; Keras 3's `predict` pulls in Python, tf_keras's in its
compiled function), on the host for JAX and torch.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

from gpuwhy.hooks import (
    emitter,
    input_pipelines,
    iterators,
    keras_functions,
    patching,
    tfdata_wait,
    tracker,
)
from gpuwhy.hooks.attribution import SRC_HOST
from gpuwhy.hooks.keras_functions import set_data_mode
from gpuwhy.hooks.keras_hooks import KerasSpans, backend_name, callback_class


def install(keras: Any) -> None:
    """Patch Keras 3 (`keras`) or tf_keras: callbacks in fit/evaluate/predict, input timing."""
    model = getattr(keras, "Model", None)
    base = getattr(getattr(keras, "callbacks", None), "Callback", None)
    if model is None or base is None:
        emitter.report_once(f"{keras.__name__}.layout", "Keras not hooked: no Model/Callback")
        return
    backend = backend_name() if keras.__name__ == "keras" else "tensorflow"  # tf_keras: TF's
    for name in ("fit", "evaluate", "predict"):
        patching.patch(model, name, functools.partial(_wrap_loop, base=base, backend=backend))
    if keras.__name__ == "keras":
        _install_input_timing()
    elif tfdata_wait.install():  # tf_keras pulls inside the functions its make_* return
        for name in ("train", "test", "predict"):
            patching.patch(model, f"make_{name}_function", keras_functions.stamping_maker)


def _wrap_loop(original: Callable[..., Any], *, base: type, backend: str) -> Callable[..., Any]:
    try:
        position = list(inspect.signature(original).parameters).index("callbacks") - 1
    except (TypeError, ValueError):
        position = -1

    @functools.wraps(original)
    def loop(self: Any, *args: Any, **kwargs: Any) -> Any:
        # The call comes first in this frame's code: TensorFlow captures the Python stack at
        # every op and function call it runs eagerly (three a step of Keras's loop), and finds
        # each frame's line by reading its code's line table up to the frame's position.
        args, kwargs, st, depth = _enter(args, kwargs, position, base, backend)
        try:
            return original(self, *args, **kwargs)
        finally:
            if st is not None:
                _leave(st, depth)

    return loop


def _enter(
    args: tuple[Any, ...], kwargs: dict[str, Any], position: int, base: type, backend: str
) -> tuple[tuple[Any, ...], dict[str, Any], tracker.ThreadState | None, int]:
    """A Keras loop begins: its arguments with gpuwhy's callback, this thread's state (None
    where that failed) and its depth of phases."""
    try:
        # The job trains with Keras (not merely imports it, as TensorFlow does): its family.
        emitter.report_once(
            "keras.loop", "Keras loop ran", kind="hooks", framework="keras", backend=backend
        )
        args, kwargs = _with_callback(args, kwargs, position, base)
        st = tracker.state()
        st.framework += 1
        st.mute += 1
        return args, kwargs, st, len(st.phases)
    except Exception as error:
        emitter.report_once("keras.callbacks", f"Keras callback not added: {error!r}")
        return args, kwargs, None, 0


def _leave(st: tracker.ThreadState, depth: int) -> None:
    st.framework -= 1
    st.mute -= 1
    try:
        tracker.unwind(depth, tracker.clock())  # phases an exception left open
    except Exception as error:
        emitter.report_once("keras.unwind", f"Keras phase not closed: {error!r}")


def _with_callback(
    args: tuple[Any, ...], kwargs: dict[str, Any], position: int, base: type
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    in_args = 0 <= position < len(args)
    given = args[position] if in_args else kwargs.get("callbacks")
    if isinstance(getattr(given, "callbacks", None), list) or not (
        given is None or isinstance(given, (list, tuple, base))
    ):
        return args, kwargs  # a CallbackList (evaluate inside fit reuses fit's: has ours)
    callbacks: list[Any] = [given] if isinstance(given, base) else list(given or ())  # type: ignore[call-overload]
    if any(isinstance(callback, KerasSpans) for callback in callbacks):
        return args, kwargs
    callbacks.insert(0, callback_class(base)())  # first: its stamps are the tightest
    if in_args:
        return (*args[:position], callbacks, *args[position + 1 :]), kwargs
    return args, {**kwargs, "callbacks": callbacks}


def _install_input_timing() -> None:
    """Patch the epoch iterator of the backend Keras runs on (fixed per process)."""
    backend = backend_name()
    module = sys.modules.get(f"keras.src.backend.{backend}.trainer")
    names = {
        "tensorflow": "TFEpochIterator",
        "jax": "JAXEpochIterator",
        "torch": "TorchEpochIterator",
    }
    epoch_iterator = getattr(module, names.get(backend, ""), None)
    if epoch_iterator is None:
        emitter.report_once("keras.input", f"Keras input not timed on backend {backend!r}")
        return
    if backend == "tensorflow":
        # fit and evaluate pull inside their compiled loop: stamped there (keras_functions),
        # as are their steps' compute ends where an execution runs several steps.
        tfdata_wait.install()
        patching.patch(epoch_iterator, "_get_iterator", _predict_timing)
        trainer = getattr(module, "TensorFlowTrainer", None)
        if callable(getattr(trainer, "_make_function", None)):
            patching.patch(trainer, "_make_function", tfdata_wait.timing_steps)
    else:
        patching.patch(epoch_iterator, "_get_iterator", _host_timing)


def _host_timing(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    @functools.wraps(original)
    def _get_iterator(self: Any) -> Any:
        started = tracker.clock()
        data = original(self)
        # A PyDataset's loading (in the loop, threads or processes); a DataLoader or tf.data
        # dataset inside is described as its own iterator is made.
        py_dataset = getattr(getattr(self, "data_adapter", None), "py_dataset", None)
        if py_dataset is not None:
            input_pipelines.py_dataset_made(py_dataset, started)
        try:
            wrapped = iterators.timed(data)
        except Exception as error:
            emitter.report_once("keras.input", f"Keras input not timed: {error!r}")
            set_data_mode(0, repr(error))
            return data
        set_data_mode(SRC_HOST, None)
        return wrapped

    return _get_iterator


def _predict_timing(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """On TensorFlow, `predict` fetches its batches in Python before each compiled call:
    timed on the host; the iterators of other phases are left as Keras made them."""
    host = _host_timing(original)

    @functools.wraps(original)
    def _get_iterator(self: Any) -> Any:
        if tracker.current_phase() == "predict":
            return host(self)
        return original(self)

    return _get_iterator
