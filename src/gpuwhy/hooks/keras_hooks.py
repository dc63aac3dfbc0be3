"""The gpuwhy Keras callback: phases and steps, on every Keras 3 backend and on tf_keras.

`callback_class()` makes it (`gpuwhy.KerasCallback`); `keras_patches` adds it to every fit.

- phases: "train" (fit), "validation" (evaluate inside fit), "evaluate", "predict";
- steps from the batch-*begin* hooks: a step lasts until the next step begins or its phase
  ends, so it needs no batch-end timing, which Keras runs on a worker thread on JAX and torch;
- batch-*end* hooks only stamp "this execution's results exist" (`async_safe = True`: the
  stamp is taken on Keras's callback thread after the logs were fetched, keeping Keras's
  asynchronous dispatch on; the callback never reads `self.model`, which syncs JAX state);
- `steps_per_execution=N`: one step span per execution, `steps` = the batches it really ran;
- `gpuwhy run --profile`: train batches open and close the profiler window (backend_window.py).

"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from gpuwhy.hooks import backend_window, emitter, keras_functions, tracker
from gpuwhy.hooks.attribution import DONE, EXPECT_DONE, OVERLAP, SRC_GRAPH, SRC_HOST

_EXECS_KEPT = 1024  # executions remembered per phase to match late batch-end stamps


_safe = emitter.guarded("Keras")


class KerasSpans:
    """The callback's behaviour; `callback_class()` mixes it into a Keras `Callback`."""

    async_safe = True
    _keras_backend: str | None = None  # None: Keras 3's (backend_name)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # tf_keras: the logs it is given stay tensors (no fetch per batch; allowed under
        # ParameterServerStrategy). Its Callback sets False on the instance.
        self._supports_tf_logs = True
        self._in_fit = 0
        self._depths: list[int] = []
        self._test_phase = "evaluate"
        self._steps_per_execution = 1
        self._backend = "tensorflow"
        self._execs: dict[str, dict[int, int]] = {}  # phase -> {first batch: exec id}
        self._restore: list[Callable[[], None] | None] = []
        self._window: backend_window.BackendWindow | None = None
        self._train_batches = 0  # train batches begun since the train phase's round began
        self._done_on_return: set[str] = set()  # phases whose compiled loop stamps DONE

    # phases -----------------------------------------------------------------------------
    @_safe
    def on_train_begin(self, logs: Any = None) -> None:
        self._in_fit += 1
        self._train_batches = 0
        self._enter("train", "train_function")
        self._window = backend_window.window_for(self._backend)

    @_safe
    def on_train_end(self, logs: Any = None) -> None:
        self._in_fit = max(0, self._in_fit - 1)
        self._leave()
        if self._window is not None:
            self._window.close()

    @_safe
    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        # An epoch without validation before it: a round of its own, as the rounds that
        # validation separates (a first epoch that fills a cache is then seen as such).
        if self._train_batches:
            self._train_batches = 0
            tracker.new_round(tracker.clock())

    @_safe
    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        tracker.end_step(tracker.clock())  # the epoch's last step ends here
        if self._window is not None:
            self._window.pause()

    @_safe
    def on_test_begin(self, logs: Any = None) -> None:
        self._test_phase = "validation" if self._in_fit else "evaluate"
        self._enter(self._test_phase, "test_function")

    @_safe
    def on_test_end(self, logs: Any = None) -> None:
        self._leave()
        self._train_batches = 0  # the train phase, if any, begins a new round

    @_safe
    def on_predict_begin(self, logs: Any = None) -> None:
        self._enter("predict", "predict_function")

    @_safe
    def on_predict_end(self, logs: Any = None) -> None:
        self._leave()

    # steps ------------------------------------------------------------------------------
    # Not `_safe`-wrapped: `_begin` and `_done` guard themselves, a call fewer every batch.
    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._begin("train", batch, True)

    def on_test_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._begin(self._test_phase, batch)

    def on_predict_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._begin("predict", batch)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self._done("train", batch)

    def on_test_batch_end(self, batch: int, logs: Any = None) -> None:
        self._done(self._test_phase, batch)

    def on_predict_batch_end(self, batch: int, logs: Any = None) -> None:
        self._done("predict", batch)

    # ------------------------------------------------------------------------------------
    def _enter(self, phase: str, function: str) -> None:
        model = vars(self).get("_model") or vars(self).get("model")  # never the JAX-syncing
        self._steps_per_execution = _int_or_one(getattr(model, "steps_per_execution", 1))
        self._backend = self._keras_backend or backend_name()
        self._depths.append(tracker.push_phase(phase, tracker.clock()))
        self._execs[phase] = {}
        restore = keras_functions.watch(model, function, self._backend)
        self._restore.append(restore)
        if restore is not None and self._backend == "tensorflow":
            self._done_on_return.add(phase)  # its batch-end stamp would come later: not sent
        else:
            self._done_on_return.discard(phase)

    def _leave(self) -> None:
        if self._depths:
            tracker.unwind(self._depths.pop(), tracker.clock())
        restore = self._restore.pop() if self._restore else None
        if restore is not None:
            restore()
        if not self._depths:
            tracker.state().step_done = None

    def _begin(self, phase: str, batch: int, train: bool = False) -> None:
        try:
            if train:
                if self._window is not None:
                    self._window.on_batch_begin()  # (a profiler started there is not the step)
                self._train_batches += 1
            t = tracker.clock()
            st = tracker.state()
            source = st.data_modes.get(phase, 0)
            mode = source | EXPECT_DONE
            in_graph_loop = source & SRC_GRAPH  # (Keras 3's predict pulls in Python: SRC_HOST)
            if in_graph_loop or (source & SRC_HOST and self._backend == "jax"):
                mode |= OVERLAP  # the next batch is requested while this one computes
            spe = self._steps_per_execution
            exec_id = tracker.begin_step(
                t, steps=spe, expected=spe if source & SRC_HOST else None, mode=mode, st=st
            )
            execs = self._execs.setdefault(phase, {})
            execs[batch] = exec_id
            if len(execs) > _EXECS_KEPT:  # batch ends that never came (an exception, a stop)
                execs.pop(next(iter(execs)), None)
        except Exception as error:
            emitter.report_once("Keras.batch_begin", f"Keras hook failed: {error!r}")

    def _done(self, phase: str, batch: int) -> None:
        # May run on Keras's callback thread. Keras reports an execution's end as its first
        # batch + steps_per_execution - 1, even for a shorter last one
        # (references.md#keras-steps-per-execution).
        try:
            t = tracker.clock()
            first = batch - self._steps_per_execution + 1
            exec_id = self._execs.get(phase, {}).pop(first, None)
            if exec_id is not None and phase not in self._done_on_return:
                emitter.emit((DONE, exec_id, t))
        except Exception as error:
            emitter.report_once("Keras.batch_end", f"Keras hook failed: {error!r}")


def _int_or_one(value: Any) -> int:
    try:
        return max(1, int(value))
    except (TypeError, ValueError):  # "auto" before Keras resolved it
        return 1


def backend_name() -> str:
    """The backend Keras 3 runs on in this process (fixed once Keras is imported)."""
    keras = sys.modules.get("keras")
    try:
        return str(keras.config.backend()) if keras is not None else "tensorflow"
    except Exception:
        return "unknown"


_classes: dict[type, type] = {}


def callback_class(base: type | None = None) -> type:
    """The gpuwhy Keras callback class for `base` (default: Keras 3 `keras.callbacks.Callback`)."""
    if base is None:
        import keras

        base = keras.callbacks.Callback
    cls = _classes.get(base)
    if cls is None:
        namespace = {
            "__module__": __name__,
            "__doc__": _CALLBACK_DOC,
            "async_safe": True,
            # tf_keras runs on TensorFlow whatever Keras 3's backend is.
            "_keras_backend": "tensorflow" if _is_tf_keras(base) else None,
        }
        cls = _classes[base] = type("KerasCallback", (KerasSpans, base), namespace)
    return cls


def _is_tf_keras(base: type) -> bool:
    return str(getattr(base, "__module__", "")).split(".")[0] == "tf_keras"


_CALLBACK_DOC = """Records Keras phases and steps for gpuwhy (O(1) per batch, no device sync).

    model.fit(x, callbacks=[gpuwhy.KerasCallback()])
"""
