"""Keras patches: the gpuwhy callback in every fit/evaluate/predict, and input timing.

`install(keras)` patches `Model.fit/evaluate/predict` of Keras 3 (or tf_keras) to put one gpuwhy
callback first in the callback list (never twice; evaluate inside fit reuses fit's), and the
epoch iterator of the backend Keras runs on so its input pulls are timed: in-graph on
TensorFlow (`tfdata_wait`), on the host for JAX and torch.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

from gpuwhy.hooks import emitter, iterators, patching, tfdata_wait, tracker
from gpuwhy.hooks.attribution import SRC_GRAPH, SRC_HOST
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


def _wrap_loop(original: Callable[..., Any], *, base: type, backend: str) -> Callable[..., Any]:
    try:
        position = list(inspect.signature(original).parameters).index("callbacks") - 1
    except (TypeError, ValueError):
        position = -1

    @functools.wraps(original)
    def loop(self: Any, *args: Any, **kwargs: Any) -> Any:
        st = None
        try:
            # The job trains with Keras (not merely imports it, as TensorFlow does): its family.
            emitter.report_once(
                "keras.loop", "Keras loop ran", kind="hooks", framework="keras", backend=backend
            )
            args, kwargs = _with_callback(args, kwargs, position, base)
            st = tracker.state()
            st.framework += 1
            st.mute += 1
            depth = len(st.phases)
        except Exception as error:
            emitter.report_once("keras.callbacks", f"Keras callback not added: {error!r}")
        try:
            return original(self, *args, **kwargs)
        finally:
            if st is not None:
                st.framework -= 1
                st.mute -= 1
                try:
                    tracker.unwind(depth, tracker.clock())  # phases an exception left open
                except Exception as error:
                    emitter.report_once("keras.unwind", f"Keras phase not closed: {error!r}")

    return loop


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
    timing = _graph_timing if backend == "tensorflow" else _host_timing
    patching.patch(epoch_iterator, "_get_iterator", timing)


def _host_timing(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    @functools.wraps(original)
    def _get_iterator(self: Any) -> Any:
        data = original(self)
        try:
            wrapped = iterators.timed(data)
        except Exception as error:
            emitter.report_once("keras.input", f"Keras input not timed: {error!r}")
            _set_mode(0, repr(error))
            return data
        _set_mode(SRC_HOST, None)
        return wrapped

    return _get_iterator


def _graph_timing(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    @functools.wraps(original)
    def _get_iterator(self: Any) -> Any:
        dataset = original(self)
        if _made_for_nothing(self):
            return dataset
        in_memory = type(getattr(self, "data_adapter", None)).__name__ == "ArrayDataAdapter"
        if in_memory and tracker.current_phase() in ("evaluate", "predict"):
            # Arrays get a new dataset every call, and stamping one costs ~20 ms to set up:
            # too much for predict() in a loop. In fit it is paid once.
            _set_mode(0, "in-memory arrays outside fit are not stamped (set-up cost per call)")
            return dataset
        try:
            wrapped, reason = tfdata_wait.wrap(dataset)
        except Exception as error:
            wrapped, reason = dataset, f"wrapping failed: {error!r}"
        _set_mode(0 if reason else SRC_GRAPH, reason)
        return wrapped

    return _get_iterator


def _made_for_nothing(epoch_iterator: Any) -> bool:
    """Whether the iterator Keras asks for now is one it will never pull from.

    When an epoch has seen all its batches, Keras 3 (`EpochIterator._enumerate_iterator`) makes
    the next epoch's iterator at once, but without `steps_per_epoch` it makes yet another at that
    epoch's start and never pulls from the first. Stamps would only cost it ~6 ms to
    instantiate: it keeps the plain dataset.
    """
    batches = getattr(epoch_iterator, "_num_batches", None)
    seen = getattr(epoch_iterator, "_steps_seen", None)
    return (
        getattr(epoch_iterator, "steps_per_epoch", 0) is None
        and isinstance(batches, int)
        and isinstance(seen, int)
        and batches > 0
        and seen >= batches
        and _remakes_at_epoch_start(type(epoch_iterator))
    )


_remakes: dict[type, bool] = {}


def _remakes_at_epoch_start(epoch_iterator: type) -> bool:
    """Whether this Keras makes a new iterator at each epoch's start without `steps_per_epoch`
    (read once from its source; where it cannot be read, every iterator is stamped)."""
    if epoch_iterator not in _remakes:
        try:
            source = inspect.getsource(getattr(epoch_iterator, "_enumerate_iterator"))  # noqa: B009
        except (AttributeError, OSError, TypeError):
            source = ""
        _remakes[epoch_iterator] = "self.steps_per_epoch is None" in source
    return _remakes[epoch_iterator]


def _set_mode(mode: int, reason: str | None) -> None:
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
