"""A jitted function compiled again, timed by the hooks (hooks/jax_compiles.py) through JAX's
own monitoring events: real JAX, real compiles. A function's first compile is warm-up."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hookspans import Collected

from gpuwhy.wire import RETRACE_EVENT

jax = pytest.importorskip("jax")
pytestmark = pytest.mark.slow  # every test starts JAX and compiles


def compiled_again(collected: Collected) -> list[dict[str, object]]:
    return [event.data for event in collected.events(RETRACE_EVENT)]


def make_step() -> object:
    @jax.jit
    def step(w: object, x: object) -> object:
        return w - 0.01 * jax.grad(lambda w: jax.numpy.sum((x @ w) ** 2))(w)

    return step


def test_a_new_batch_shape_compiles_the_step_again_once_per_shape(hooks: Collected) -> None:
    step, w = make_step(), np.ones((8, 4), "float32")
    for rows in (16, 16, 16, 10, 16, 10, 7):  # NumPy inputs: no compile of JAX's own
        w = step(w, np.ones((rows, 8), "float32"))
    found = compiled_again(hooks)
    assert [event["function"] for event in found] == ["step", "step"]  # 10 rows, then 7
    assert {event["pid"] for event in found} == {os.getpid()}
    assert all(isinstance(e["duration_ns"], int) and e["duration_ns"] > 0 for e in found)


def test_the_same_shapes_compile_once(hooks: Collected) -> None:
    step, w = make_step(), np.ones((8, 4), "float32")
    for _ in range(5):
        w = step(w, np.ones((16, 8), "float32"))
    assert compiled_again(hooks) == []


def test_a_new_static_value_compiles_again(hooks: Collected) -> None:
    @jax.jit(static_argnames="power")
    def loss(x: object, power: int) -> object:
        return jax.numpy.mean(x**power)

    x = np.ones((4, 4), "float32")
    for power in (2, 3, 2, 4):
        loss(x, power=power)
    assert [event["function"] for event in compiled_again(hooks)] == ["loss", "loss"]


def test_without_the_hooks_nothing_is_heard(collected: Collected) -> None:
    step, w = make_step(), np.ones((8, 4), "float32")
    for rows in (16, 10):
        w = step(w, np.ones((rows, 8), "float32"))
    assert collected.events(RETRACE_EVENT) == []


def test_once_the_hooks_go_no_evaluation_of_theirs_is_ended_later(collected: Collected) -> None:
    """What a loop called under the hooks (a train step, then twice a function that takes no
    gradient: an evaluation's shape) is forgotten when they are removed: a later run's exit
    ends its own evaluation where that one ended (jax_steps.uninstall)."""
    from gpuwhy.hooks import auto, tracker
    from gpuwhy.model import SpanKind

    auto.install({})
    try:
        step, double = make_step(), jax.jit(lambda x: x * 2)
        step(np.ones((8, 4), "float32"), np.ones((16, 8), "float32"))
        for _ in range(2):
            double(np.ones(3, "float32"))
    finally:
        auto.uninstall()
    tracker.reset()
    tracker.optimizer_step(10)  # a later run: a step, then an evaluation it ends itself
    tracker.model_mode(False, 20)
    tracker.evaluated(30)
    tracker.finalize(100)
    validation = collected.spans(SpanKind.PHASE, "validation")
    assert [(span.start_ns, span.end_ns) for span in validation] == [(20, 30)]
