"""Keras 2 (tf_keras, what `tf.keras` is under TF_USE_LEGACY_KERAS=1) with the
auto-instrumentation: real training, real tf.data. Its loops call the function
`make_*_function` made, which pulls its batch in-graph (predict too)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from hookspans import Collected, small_classifier

from gpuwhy.model import SpanKind

tf = pytest.importorskip("tensorflow")
tf_keras = pytest.importorskip("tf_keras")
pytestmark = pytest.mark.slow  # every test trains a model

BATCH = 16
SLEEP_S = 0.02


def data(batches: int, *, slow: bool = False, seed: int = 0) -> Any:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batches * BATCH, 4)).astype("float32")
    y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
    if slow:

        def nap(v: Any) -> Any:
            time.sleep(SLEEP_S)
            return v

        ds = ds.map(
            lambda a, b: (tf.ensure_shape(tf.numpy_function(nap, [a], tf.float32), a.shape), b)
        )
        options = tf.data.Options()
        options.autotune.enabled = False  # no prefetching: every pull pays the read
        ds = ds.with_options(options)
    return ds


def model(steps_per_execution: int = 1) -> Any:
    return small_classifier(tf_keras, steps_per_execution)


def waits_ms(collected: Collected, phase: str) -> list[float]:
    return [(w.end_ns - w.start_ns) / 1e6 for w in collected.spans(SpanKind.WAIT, phase)]


def test_every_phase_has_its_steps_and_the_wait_of_each_batch(hooks: Collected) -> None:
    m = model()
    m.fit(data(4, slow=True), epochs=2, validation_data=data(2, slow=True, seed=1), verbose=0)
    m.evaluate(data(3, slow=True), verbose=0)
    m.predict(data(2, slow=True), verbose=0)
    expected = {"train": 8, "validation": 4, "evaluate": 3, "predict": 2}
    for phase, steps in expected.items():
        spans = hooks.spans(SpanKind.STEP, phase)
        assert sum(s.steps for s in spans) == steps, phase
        waits = hooks.spans(SpanKind.WAIT, phase)
        assert [w.step for w in waits] == [s.step for s in spans], phase
        assert all(ms >= 0.75 * SLEEP_S * 1e3 for ms in waits_ms(hooks, phase)), phase
    assert hooks.events("data_wait_unavailable") == []
    assert not hooks.events("hook")  # no hook failed


def test_in_memory_input_waits_a_small_part_of_each_step(hooks: Collected) -> None:
    """The same model over the same batches made at once: what a pull takes is the hand-over
    of a batch from tf.data's thread, no sleep."""
    model().fit(data(20), epochs=1, verbose=0)
    waits = waits_ms(hooks, "train")
    assert len(waits) == 20
    assert float(np.median(waits)) < 0.25 * SLEEP_S * 1e3


def test_steps_per_execution_waits_cover_the_batches_run(hooks: Collected) -> None:
    model(steps_per_execution=2).fit(data(5, slow=True), epochs=1, verbose=0)
    steps = hooks.spans(SpanKind.STEP, "train")
    assert [s.steps for s in steps] == [2, 2, 1]
    assert [w.steps for w in hooks.spans(SpanKind.WAIT, "train")] == [2, 2, 1]
    assert sum(waits_ms(hooks, "train")) >= 5 * 0.75 * SLEEP_S * 1e3


def test_a_loop_run_eagerly_has_its_waits_measured(hooks: Collected) -> None:
    m = model()
    m.run_eagerly = True
    m.fit(data(3, slow=True), epochs=1, verbose=0)
    waits = waits_ms(hooks, "train")
    assert len(waits) == len(hooks.spans(SpanKind.STEP, "train")) == 3
    assert all(ms >= 0.75 * SLEEP_S * 1e3 for ms in waits)


def test_a_distributed_fit_has_its_waits_measured(hooks: Collected) -> None:
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        m = model()
    m.fit(data(4, slow=True), epochs=1, verbose=0)
    assert sum(s.steps for s in hooks.spans(SpanKind.STEP, "train")) == 4
    # Each batch slept 20 ms: half of them at least were waited for (a background thread
    # fills the distributed iterator's buffer while the first step traces).
    assert sum(waits_ms(hooks, "train")) >= 2 * 0.75 * SLEEP_S * 1e3
    assert hooks.events("data_wait_unavailable") == []


def test_a_loop_compiled_before_the_hooks_has_unknown_wait_not_zero(collected: Collected) -> None:
    from gpuwhy.hooks import auto

    m = model()
    m.fit(data(2), epochs=1, verbose=0)  # traced here, without gpuwhy
    auto.install({})
    try:
        m.fit(data(3), epochs=1, verbose=0)
    finally:
        auto.uninstall()
    assert len(collected.spans(SpanKind.STEP, "train")) == 3
    assert collected.spans(SpanKind.WAIT, "train") == []
    unknown = collected.events("data_wait_unavailable")
    assert [e.data["phase"] for e in unknown] == ["train"]
    assert "compiled before" in unknown[0].data["reason"]


def test_the_logs_other_callbacks_get_stay_tensors(hooks: Collected) -> None:
    """tf_keras fetches every batch's logs to NumPy unless each callback with batch hooks
    takes tensors (`_supports_tf_logs`); gpuwhy's does, so a fit costs no fetch more, and
    one under ParameterServerStrategy (which refuses callbacks that do not) still runs."""
    seen: list[type] = []

    class TensorLogs(tf_keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self._supports_tf_logs = True  # (tf_keras's Callback sets False on the instance)

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            seen.append(type(logs["loss"]))

    model().fit(data(3), epochs=1, verbose=0, callbacks=[TensorLogs()])
    assert len(hooks.spans(SpanKind.STEP, "train")) == 3  # gpuwhy's callback was there
    assert len(seen) == 3 and all(issubclass(t, tf.Tensor) for t in seen), seen


def test_training_results_are_the_same_with_and_without_hooks(collected: Collected) -> None:
    from gpuwhy.hooks import auto

    def train() -> list[Any]:
        m = model(steps_per_execution=2)
        history = m.fit(data(6), epochs=2, validation_data=data(2, seed=1), verbose=0)
        predictions = m.predict(data(2, seed=2), verbose=0)
        return [history.history["loss"], history.history["val_loss"], *m.get_weights(), predictions]

    plain = train()
    auto.install({})
    try:
        hooked = train()
    finally:
        auto.uninstall()
    assert len(collected.spans(SpanKind.WAIT, "train")) == 6  # it really was instrumented
    for a, b in zip(plain, hooked, strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_callback_alone_says_why_the_wait_is_unknown(collected: Collected) -> None:
    """Without the auto-instrumentation (a job that adds gpuwhy's callback itself, no
    `gpuwhy run`) the steps are there and the wait is unknown, with the reason."""
    from gpuwhy.hooks.keras_hooks import callback_class

    callback = callback_class(tf_keras.callbacks.Callback)()  # gpuwhy.KerasCallback, for tf_keras
    model().fit(data(3), epochs=1, verbose=0, callbacks=[callback])
    assert len(collected.spans(SpanKind.STEP, "train")) == 3
    unknown = collected.events("data_wait_unavailable")
    assert [e.data["reason"] for e in unknown] == [
        "tf.data's iterators are not hooked in this process"
    ]
