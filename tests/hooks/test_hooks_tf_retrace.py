"""Calls that traced a `tf.function` again, timed by the hooks (hooks/tf_traces.py): real
TensorFlow, real traces. A function's first trace is warm-up and not sent."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hookspans import Collected

from gpuwhy.wire import RETRACE_EVENT

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.slow  # every test starts TensorFlow


def retraces(hooks: Collected) -> list[dict[str, object]]:
    return [event.data for event in hooks.events(RETRACE_EVENT)]


def scaled_sum() -> object:
    weights = tf.Variable(tf.ones((8, 4)))

    @tf.function
    def step(x: object, scale: object) -> object:
        return tf.reduce_sum(tf.matmul(x, weights)) * scale

    return step


def test_a_python_number_passed_each_call_retraces_every_call(hooks: Collected) -> None:
    step, x = scaled_sum(), tf.ones((2, 8))
    for i in range(6):
        step(x, float(i))  # a new Python value: a new signature, a new trace
    found = retraces(hooks)
    assert len(found) == 5  # the first trace is the function's warm-up
    assert {event["function"] for event in found} == {"step"}
    assert {event["pid"] for event in found} == {os.getpid()}
    assert all(isinstance(e["duration_ns"], int) and e["duration_ns"] > 0 for e in found)


def test_the_same_number_as_a_tensor_traces_once(hooks: Collected) -> None:
    step, x = scaled_sum(), tf.ones((2, 8))
    for i in range(6):
        step(x, tf.constant(float(i)))
    assert retraces(hooks) == []


def test_a_smaller_last_batch_retraces_once_and_later_epochs_not_again(hooks: Collected) -> None:
    step = scaled_sum()
    data = tf.data.Dataset.from_tensor_slices(np.ones((10, 8), "float32")).batch(4)
    for _ in range(3):  # batches of 4, 4, then 2: a new shape once
        for batch in data:
            step(batch, tf.constant(1.0))
    assert len(retraces(hooks)) == 1


def test_a_function_called_inside_a_trace_is_part_of_the_outer_call(hooks: Collected) -> None:
    inner = scaled_sum()

    @tf.function
    def outer(x: object, scale: float) -> object:
        return inner(x, scale) + 1.0

    for i in range(4):
        outer(tf.ones((2, 8)), float(i))  # each retraces outer, and inner in its trace
    found = retraces(hooks)
    assert [event["function"] for event in found] == ["outer"] * 3


def test_without_the_hooks_nothing_is_timed(collected: Collected) -> None:
    step, x = scaled_sum(), tf.ones((2, 8))
    for i in range(3):
        step(x, float(i))
    assert collected.events(RETRACE_EVENT) == []
