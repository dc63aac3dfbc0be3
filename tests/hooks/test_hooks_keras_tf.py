"""Keras 3 on TensorFlow with the auto-instrumentation: real training, real tf.data."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hookspans import Collected, small_classifier, step_waits

from gpuwhy.hooks import tracker
from gpuwhy.model import SpanKind

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
pytestmark = pytest.mark.slow  # every test trains a Keras model
if keras.config.backend() != "tensorflow":  # pragma: no cover - other backends: subprocess tests
    pytest.skip("Keras runs on another backend in this process", allow_module_level=True)

BATCH = 16


def data(batches: int, *, sleep_s: float = 0.0, seed: int = 0, serial: bool = False) -> Any:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batches * BATCH, 4)).astype("float32")
    y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
    if sleep_s:

        def slow(a: Any, b: Any) -> Any:
            def nap(v: Any) -> Any:
                time.sleep(sleep_s)
                return v

            a2 = tf.py_function(nap, [a], tf.float32)
            a2.set_shape(a.shape)
            return a2, b

        ds = ds.map(slow)
    if serial:  # no prefetching by tf.data: every pull pays the map
        options = tf.data.Options()
        options.autotune.enabled = False
        ds = ds.with_options(options)
    return ds


def model(steps_per_execution: int = 1) -> Any:
    return small_classifier(keras, steps_per_execution)


def counts(collected: Collected) -> dict[str, tuple[int, int, int]]:
    """phase -> (STEP spans, steps they cover, WAIT spans)."""
    out = {}
    for phase in ("train", "validation", "evaluate", "predict"):
        steps = collected.spans(SpanKind.STEP, phase)
        waits = collected.spans(SpanKind.WAIT, phase)
        out[phase] = (len(steps), sum(s.steps for s in steps), len(waits))
    return out


def test_fit_evaluate_predict_emit_their_phases_and_steps(hooks: Collected) -> None:
    m = model()
    m.fit(data(5), epochs=2, validation_data=data(2, seed=1), verbose=0, shuffle=False)
    m.evaluate(data(3), verbose=0)
    m.predict(data(2), verbose=0)
    assert counts(hooks) == {
        "train": (10, 10, 10),
        "validation": (4, 4, 4),
        "evaluate": (3, 3, 3),
        "predict": (2, 2, 2),
    }
    names = [p.phase for p in hooks.spans(SpanKind.PHASE)]
    assert names == ["train", "validation", "train", "validation", "train", "evaluate", "predict"]
    phases = hooks.spans(SpanKind.PHASE)
    for earlier, later in itertools.pairwise(phases):
        assert earlier.end_ns <= later.start_ns  # phases of a thread never overlap
    for span in hooks.spans(SpanKind.STEP):  # every step lies inside a phase of its name
        assert any(
            p.phase == span.phase and p.start_ns <= span.start_ns and span.end_ns <= p.end_ns
            for p in phases
        )
    train = hooks.spans(SpanKind.STEP, "train")
    first = train[0].step or 0  # indices are per process and phase name: they continue
    assert [s.step for s in train] == list(range(first, first + 10))
    assert not hooks.events("hook")  # no hook failed


def test_each_epoch_of_one_fit_is_a_round_of_its_own(hooks: Collected) -> None:
    """Epochs split by validation were rounds already; an epoch no validation preceded begins
    a PHASE span of its own (tracker.new_round), so the analysis tells every epoch apart."""
    m = model()
    m.fit(
        data(5), epochs=4, validation_data=data(2, seed=1), validation_freq=2, verbose=0,
        shuffle=False,
    )  # fmt: skip
    phases = hooks.spans(SpanKind.PHASE)
    names = [p.phase for p in phases]
    assert names == ["train", "train", "validation", "train", "train", "validation", "train"]
    steps = hooks.spans(SpanKind.STEP, "train")
    per_span = [
        sum(1 for s in steps if p.start_ns <= s.start_ns < p.end_ns)
        for p in phases
        if p.phase == "train"
    ]
    assert per_span == [5, 5, 5, 5, 0]  # each epoch's steps in its own span; then fit's end
    for earlier, later in itertools.pairwise(phases):
        assert earlier.end_ns <= later.start_ns


def test_each_wait_lies_inside_its_step(hooks: Collected) -> None:
    model().fit(data(4, sleep_s=0.02, serial=True), epochs=1, verbose=0, shuffle=False)
    steps = {s.step: s for s in hooks.spans(SpanKind.STEP, "train")}
    waits = hooks.spans(SpanKind.WAIT, "train")
    assert len(waits) == len(steps) == 4
    for wait in waits:
        step = steps[wait.step]
        assert step.start_ns <= wait.start_ns <= wait.end_ns <= step.end_ns
        assert wait.end_ns - wait.start_ns >= 15e6  # each batch slept 20 ms before delivery


@pytest.mark.parametrize("per_execution", [1, 8])
def test_every_pull_of_a_long_fit_is_read_back_once(hooks: Collected, per_execution: int) -> None:
    """Hundreds of pulls, drained by several flushes while the fit runs: each step (each
    execution of `per_execution` steps) gets its pulls' wait, and no pull is read twice."""
    model(steps_per_execution=per_execution).fit(data(400), epochs=1, verbose=0, shuffle=False)
    steps = {s.step: s for s in hooks.spans(SpanKind.STEP, "train")}
    waits = hooks.spans(SpanKind.WAIT, "train")
    assert sum(s.steps for s in steps.values()) == 400
    assert len(waits) == len(steps) == 400 // per_execution
    assert sorted(w.step for w in waits) == sorted(steps)
    for wait in waits:
        step = steps[wait.step]
        assert step.start_ns <= wait.start_ns <= wait.end_ns <= step.end_ns


def test_steps_per_execution_spans_cover_the_steps_really_run(hooks: Collected) -> None:
    model(steps_per_execution=4).fit(data(10), epochs=2, verbose=0, shuffle=False)
    train = hooks.spans(SpanKind.STEP, "train")
    assert [s.steps for s in train] == [4, 4, 2, 4, 4, 2]  # Keras says 4 for the last: it ran 2
    assert [w.steps for w in hooks.spans(SpanKind.WAIT, "train")] == [4, 4, 2, 4, 4, 2]
    starts = [s.step for s in train]
    assert starts == sorted(set(starts))


def _records_polled(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every in-graph record the emitter polls from now on: pulls and compute ends (the poller
    the emitter already holds, bound to the process's record of pulls, or the one it will)."""
    from gpuwhy.hooks import emitter, tfdata_wait

    seen: list[tuple[int, int]] = []

    def seen_by(poll: Callable[..., list[tuple[int, int]]]) -> Callable[..., list[tuple[int, int]]]:
        def polled(*args: Any) -> list[tuple[int, int]]:
            records = poll(*args)
            seen.extend(records)
            return records

        return polled

    monkeypatch.setattr(tfdata_wait._Pulls, "poll", seen_by(tfdata_wait._Pulls.poll))
    pollers = [
        seen_by(poller)
        if isinstance(getattr(poller, "__self__", None), tfdata_wait._Pulls)
        else poller
        for poller in emitter._pollers
    ]
    monkeypatch.setattr(emitter, "_pollers", pollers)
    return seen


def test_several_steps_per_execution_stamp_each_compute_end(
    hooks: Collected, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Later pulls of an execution overlap the previous step's compute: their wait counts from
    that compute's end, which each step stamps (tfdata_wait.timing_steps). One stamp a step,
    after its batch arrived and before the next execution began."""
    from gpuwhy.hooks import emitter
    from gpuwhy.hooks.attribution import COMPUTE_END

    seen = _records_polled(monkeypatch)
    model(steps_per_execution=4).fit(
        data(8, sleep_s=0.02, serial=True), epochs=1, verbose=0, shuffle=False
    )
    emitter.flush(5.0)
    ends = sorted(t for t, kind in seen if kind == COMPUTE_END)
    pulls = sorted(record for record in seen if record[1] != COMPUTE_END)
    assert len(ends) == len(pulls) == 8
    steps = sorted(hooks.spans(SpanKind.STEP, "train"), key=lambda s: s.start_ns)
    for k, ((_, delivered), ended) in enumerate(zip(pulls, ends, strict=True)):
        assert delivered <= ended <= steps[k // 4].end_ns
    # Each batch slept 20 ms while the previous step's tiny compute ran: nearly all of each
    # pull is wait.
    waits = hooks.spans(SpanKind.WAIT, "train")
    assert sum(w.end_ns - w.start_ns for w in waits) >= 0.75 * sum(d - r for r, d in pulls)


@pytest.mark.parametrize("setting", ["one step per execution", "XLA"])
def test_steps_stamp_nothing_where_no_later_pull_needs_it(
    hooks: Collected, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    """One step per execution has no overlapped pull; XLA compiles no staging op: neither
    stamps its steps, and both train as without gpuwhy."""
    from gpuwhy.hooks import emitter
    from gpuwhy.hooks.attribution import COMPUTE_END

    seen = _records_polled(monkeypatch)
    xla = setting == "XLA"
    m = model(steps_per_execution=2 if xla else 1)
    if xla:
        m.compile("adam", "binary_crossentropy", steps_per_execution=2, jit_compile=True)
    m.fit(data(4), epochs=1, verbose=0, shuffle=False)
    emitter.flush(5.0)
    assert [t for t, kind in seen if kind == COMPUTE_END] == []
    assert sum(s.steps for s in hooks.spans(SpanKind.STEP, "train")) == 4


def test_a_callback_the_user_added_is_not_added_twice(hooks: Collected) -> None:
    import gpuwhy

    m = model()
    callback = gpuwhy.KerasCallback()
    m.fit(
        data(3), epochs=1, validation_data=data(1), callbacks=[callback], verbose=0, shuffle=False
    )
    assert counts(hooks)["train"] == (3, 3, 3) and counts(hooks)["validation"] == (1, 1, 1)
    assert len(hooks.spans(SpanKind.PHASE, "train")) == 2


def test_without_auto_instrumentation_the_callback_alone_records_phases(
    collected: Collected,
) -> None:
    import gpuwhy

    model().fit(data(3), epochs=1, callbacks=[gpuwhy.KerasCallback()], verbose=0, shuffle=False)
    assert len(collected.spans(SpanKind.STEP, "train")) == 3


def test_training_results_are_the_same_with_and_without_hooks(collected: Collected) -> None:
    from gpuwhy.hooks import auto

    def train() -> tuple[list[float], list[Any]]:
        m = model(steps_per_execution=2)
        history = m.fit(
            data(6), epochs=2, validation_data=data(2, seed=1), verbose=0, shuffle=False
        )
        predictions = m.predict(data(2, seed=2), verbose=0)
        return history.history["loss"] + history.history["val_loss"], [
            *m.get_weights(),
            predictions,
        ]

    plain_losses, plain_arrays = train()
    auto.install({})
    try:
        hooked_losses, hooked_arrays = train()
    finally:
        auto.uninstall()
    assert len(collected.spans(SpanKind.WAIT, "train")) == 6  # it really was instrumented
    assert hooked_losses == plain_losses
    for plain, hooked in zip(plain_arrays, hooked_arrays, strict=True):
        np.testing.assert_array_equal(plain, hooked)


def test_a_failing_sink_does_not_touch_training(hooks: Collected) -> None:
    from gpuwhy.hooks import emitter

    def broken(batch: object) -> None:
        raise OSError("socket gone")

    emitter.configure(broken)
    history = model().fit(data(3), epochs=2, verbose=0, shuffle=False)
    emitter.flush()
    assert len(history.history["loss"]) == 2


def test_a_failing_hook_is_reported_once_and_training_goes_on(
    hooks: Collected, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> int:
        raise ValueError("bug in a hook")

    monkeypatch.setattr(tracker, "begin_step", broken)
    history = model().fit(data(3), epochs=2, verbose=0, shuffle=False)
    assert len(history.history["loss"]) == 2
    failures = [e for e in hooks.events("hook") if "bug in a hook" in e.message]
    assert len(failures) == 1


@pytest.mark.parametrize("steps_per_execution", [1, 2])
def test_a_distributed_fit_has_its_waits_measured(
    hooks: Collected, steps_per_execution: int
) -> None:
    """MirroredStrategy: Keras iterates a DistributedDataset whose per-replica buffers a
    background thread fills; the stamps stand at the compiled loop's own pull of it (a batch
    that thread made while the first step traced is no wait)."""
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        m = model(steps_per_execution)
    m.fit(data(4, sleep_s=0.02, serial=True), epochs=1, verbose=0, shuffle=False)
    steps = hooks.spans(SpanKind.STEP, "train")
    assert sum(s.steps for s in steps) == 4
    waits = hooks.spans(SpanKind.WAIT, "train")
    assert [w.steps for w in waits] == [s.steps for s in steps]
    # Each batch slept 20 ms: half of them at least were waited for.
    assert sum(w.end_ns - w.start_ns for w in waits) >= 2 * 15e6
    assert hooks.events("data_wait_unavailable") == []


def test_a_loop_run_eagerly_has_its_waits_measured(hooks: Collected) -> None:
    m = model()
    m.run_eagerly = True
    m.fit(data(3, sleep_s=0.02, serial=True), epochs=1, verbose=0, shuffle=False)
    waits = hooks.spans(SpanKind.WAIT, "train")
    assert len(waits) == len(hooks.spans(SpanKind.STEP, "train")) == 3
    assert all(w.end_ns - w.start_ns >= 15e6 for w in waits)
    assert hooks.events("data_wait_unavailable") == []


def test_a_loop_compiled_before_the_hooks_has_unknown_wait_not_zero(collected: Collected) -> None:
    """Its trace has no stamps and no pulls will come: the wait is unknown, and every step is
    still there."""
    from gpuwhy.hooks import auto

    m = model()
    m.fit(data(2), epochs=1, verbose=0, shuffle=False)  # compiled here, without gpuwhy
    auto.install({})
    try:
        m.fit(data(3), epochs=1, verbose=0, shuffle=False)
    finally:
        auto.uninstall()
    assert len(collected.spans(SpanKind.STEP, "train")) == 3
    assert collected.spans(SpanKind.WAIT, "train") == []
    unknown = collected.events("data_wait_unavailable")
    assert [e.data["phase"] for e in unknown] == ["train"]
    assert "compiled before" in unknown[0].data["reason"]


def test_a_loop_whose_trace_stamps_nothing_says_its_wait_is_unknown(
    hooks: Collected, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Keras whose compiled loop pulled some way gpuwhy does not patch would trace no stamps:
    after its first call the phase's wait is unknown, and its steps are all kept."""
    from gpuwhy.hooks import tfdata_wait

    monkeypatch.setattr(tfdata_wait, "made", lambda: 0)  # as if the trace made no stamps
    model().fit(data(3), epochs=1, verbose=0, shuffle=False)
    assert len(hooks.spans(SpanKind.STEP, "train")) == 3
    assert len(hooks.spans(SpanKind.WAIT, "train")) <= 1  # the first step's, begun before
    unknown = hooks.events("data_wait_unavailable")
    assert [e.data["phase"] for e in unknown] == ["train"]
    assert "some other way" in unknown[0].data["reason"]


def test_tf_keras_is_the_same_keras(hooks: Collected) -> None:
    keras_model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    keras_model.compile("sgd", "mse")
    keras_model.fit(data(2), epochs=1, verbose=0, shuffle=False)
    assert len(hooks.spans(SpanKind.STEP, "train")) == 2


def test_a_custom_loop_over_tf_data_gets_steps_and_waits(hooks: Collected) -> None:
    m = model()
    optimizer = keras.optimizers.SGD(0.01)
    loss_fn = keras.losses.BinaryCrossentropy()

    @tf.function
    def train_step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, m(x, training=True))
        grads = tape.gradient(loss, m.trainable_variables)
        optimizer.apply_gradients(zip(grads, m.trainable_variables, strict=True))
        return loss

    for x, y in data(4, sleep_s=0.02, serial=True):
        train_step(x, y)
    steps = hooks.spans(SpanKind.STEP, "train")
    waits = step_waits(hooks.spans(SpanKind.WAIT, "train"))
    assert len(steps) == len(waits) == 4
    assert all(w.end_ns - w.start_ns >= 15e6 for w in waits)
    assert [w.step for w in waits] == [s.step for s in steps]


def test_evaluate_and_predict_over_arrays_in_a_loop_are_timed(hooks: Collected) -> None:
    """Keras makes a new dataset from arrays at every call: the stamps cost it nothing."""
    m = model()
    x = np.zeros((32, 4), dtype="float32")
    y = np.zeros((32, 1), dtype="float32")
    for _ in range(3):
        m.evaluate(x, y, batch_size=16, verbose=0)
        m.predict(x, batch_size=16, verbose=0)
    assert counts(hooks)["evaluate"] == (6, 6, 6)
    assert counts(hooks)["predict"] == (6, 6, 6)
    assert hooks.events("data_wait_unavailable") == []


def test_the_dataset_keras_iterates_is_the_users_own(
    hooks: Collected, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No stage is added to the pipeline: Keras iterates exactly the datasets it would."""
    from tensorflow.python.data.ops import dataset_ops

    from gpuwhy.hooks import auto

    def iterated() -> list[str]:
        names: list[str] = []
        iterate = dataset_ops.DatasetV2.__iter__

        def spy(dataset: Any) -> Any:
            names.append(type(dataset).__name__)
            return iterate(dataset)

        with monkeypatch.context() as patch:
            patch.setattr(dataset_ops.DatasetV2, "__iter__", spy)
            model().fit(data(3), epochs=2, validation_data=data(2), verbose=0, shuffle=False)
        return names

    hooked = iterated()
    assert counts(hooks)["train"] == (6, 6, 6)
    auto.uninstall()
    assert hooked == iterated()


@pytest.mark.parametrize("count", [1, 31, 32, 40])
def test_the_record_of_pulls_is_read_back_whole_in_one_drain(count: int) -> None:
    """Pulls staged by a compiled loop come back in the order staged, whether taken one by one
    or (from `DRAIN_CALL_FROM`) the blocks by the compiled drain: a pull's wait, a compute's
    end, none for an Optional that found the data's end."""
    from gpuwhy.hooks import tfdata_wait
    from gpuwhy.hooks.attribution import COMPUTE_END

    # An area of its own: the process's is drained by the emitter's flusher, which would
    # take these pulls (and its compiled drain then wait on its own area for them).
    area = {**tfdata_wait._AREA, "shared_name": f"gpuwhy_pulls_test_{count}"}
    pulls = tfdata_wait._Pulls(tf, area)
    expected: list[tuple[int, int | None]] = []  # (seconds after the first, wait in µs)
    for i in range(count):
        request = 1_000.0 + i
        if i % 5 == 3:
            delivery, expect = tfdata_wait._COMPUTE_END, None
        elif i % 7 == 6:
            delivery, expect = tfdata_wait._NO_ELEMENT, -1
        else:
            delivery, expect = request + (i + 1) / 1_000, (i + 1) * 1_000
        pulls.stage(tf.constant(request, tf.float64), tf.constant(delivery, tf.float64))
        if expect != -1:
            expected.append((i, expect))
    records = pulls.poll()
    first = records[0][0] - expected[0][0] * 10**9
    read = [
        (
            round((request - first) / 1e9),
            None if end == COMPUTE_END else round((end - request) / 1e3),
        )
        for request, end in records
    ]
    assert read == expected
    assert pulls.poll() == []  # nothing left behind
