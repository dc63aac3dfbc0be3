"""End to end: JAX loops over plain Python batches, which no hooked iterator times, under
`gpuwhy run`: their steps come from the compiled train step (jax_steps.py), their evaluations
are phases of their own, and the compiled functions behave for the job as they did."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hooks.test_hooks_sync_path import gpuwhy_run
from support import framework_env

pytest.importorskip("jax")
pytestmark = pytest.mark.slow

EPOCHS, TRAIN_CALLS, EVAL_BATCHES, EVAL_SLEEP_S = 3, 10, 4, 0.02

JAX_JOB = textwrap.dedent(
    f"""
    import functools, time
    import jax, jax.numpy as jnp, numpy as np

    @jax.jit
    def train_step(w, x, y):
        loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
        return w - 0.1 * grad, loss

    @jax.jit
    def metric(loss):  # a helper called once a step: no evaluation
        return loss * 2

    @jax.jit(static_argnames="power")  # the decorator-factory form
    def eval_step(w, x, power):
        return jnp.mean((x @ w) ** power)

    class Model:
        @functools.partial(jax.jit, static_argnums=0)
        def predict(self, x):  # a compiled method: bound as before
            return x.sum()

    # The compiled function keeps its own API.
    assert "PjitFunction" in repr(train_step), repr(train_step)
    assert train_step.lower(jnp.zeros(8), jnp.zeros((4, 8)), jnp.zeros(4)).compile()
    assert float(Model().predict(jnp.ones(3))) == 3.0

    rng = np.random.default_rng(0)
    w = jnp.zeros(8)
    for epoch in range({EPOCHS}):
        for _ in range({TRAIN_CALLS}):
            x = rng.random((16, 8), dtype=np.float32)
            w, loss = train_step(w, x, x.sum(1))
            metric(loss)
        for _ in range({EVAL_BATCHES}):
            time.sleep({EVAL_SLEEP_S})  # a slow host-side read of each validation batch
            eval_step(w, x, power=2)
    print(f"final {{float(loss):.8f}} {{float(eval_step(w, x, power=2)):.8f}}")
    """
)


def _watched_and_bare(
    tmp_path: Path, job: str, python: str = sys.executable, stderr: list[str] | None = None
) -> dict[str, dict[str, object]]:
    """Run `job` under `gpuwhy run` and alone: its output must be the same; the report's
    phases (and the watched run's stderr appended to `stderr`)."""
    script = tmp_path / "job.py"
    script.write_text(job)
    watched = gpuwhy_run(tmp_path, python, str(script))
    if stderr is not None:
        stderr.append(watched.stderr)
    bare = subprocess.run(
        [python, str(script)], capture_output=True, text=True, timeout=300, check=False
    )
    assert bare.returncode == 0, bare.stderr[-3000:]
    assert watched.stdout == bare.stdout and bare.stdout.startswith("final ")
    report = json.loads((tmp_path / "job.json").read_text())
    assert report["framework"] == "jax"
    return report["phases"]  # type: ignore[no-any-return]


def test_a_plain_jax_loop_has_its_train_steps_and_its_evaluations(tmp_path: Path) -> None:
    phases = _watched_and_bare(tmp_path, JAX_JOB)
    # Each epoch's ten train calls bound nine whole steps; the tenth step's end is the
    # evaluation's start, and the evaluation is no step of the training. The helper called
    # once a step makes no evaluation.
    assert phases["train"]["steps"] == EPOCHS * (TRAIN_CALLS - 1)
    validation = phases["validation"]
    # All three evaluations, the last one too (it ends with its last call, at exit).
    assert validation["rounds"] == EPOCHS
    assert validation["time_s"] >= EPOCHS * (EVAL_BATCHES - 1) * EVAL_SLEEP_S
    assert phases["train"]["data_wait_fraction"] is None  # the batches' reads are not timed


NNX_JOB = textwrap.dedent(
    """
    import numpy as np, optax
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.hidden = nnx.Linear(16, 32, rngs=rngs)
            self.out = nnx.Linear(32, 2, rngs=rngs)

        def __call__(self, x):
            return self.out(nnx.relu(self.hidden(x)))

    model = MLP(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    @nnx.jit
    def train_step(model, optimizer, x, y):
        def loss_fn(model):
            return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()
        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    @nnx.jit
    def eval_step(model, x, y):
        return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()

    rng = np.random.default_rng(0)
    x = rng.random((256, 16), dtype=np.float32)
    y = (x[:, 0] > 0.5).astype(np.int32)
    for epoch in range(2):
        for i in range(0, 256, 32):
            loss = train_step(model, optimizer, x[i : i + 32], y[i : i + 32])
        for i in range(0, 96, 32):
            eval_step(model, x[i : i + 32], y[i : i + 32])
    print(f"final {float(loss):.8f}")
    """
)


def test_a_flax_nnx_loop_is_seen_through_nnx_jit(tmp_path: Path) -> None:
    pytest.importorskip("flax.nnx")
    pytest.importorskip("optax")
    phases = _watched_and_bare(tmp_path, NNX_JOB)
    assert phases["train"]["steps"] == 2 * (8 - 1)  # 8 train calls an epoch, then 3 eval calls
    assert phases["validation"]["rounds"] == 2


GAN_BATCHES, GAN_READ_S = 40, 0.01
GAN_JOB = textwrap.dedent(
    f"""
    import time
    import jax, jax.numpy as jnp, numpy as np

    @jax.jit
    def discriminator_step(d, g, x):
        loss, grad = jax.value_and_grad(lambda d: jnp.mean((x @ d - (x @ g) * 0.5) ** 2))(d)
        return d - 0.01 * grad, loss

    @jax.jit
    def generator_step(g, d, x):
        loss, grad = jax.value_and_grad(lambda g: -jnp.mean((x @ d) * (x @ g)))(g)
        return g - 0.01 * grad, loss

    def batches(rng):
        for _ in range({GAN_BATCHES}):
            time.sleep({GAN_READ_S})  # storage
            yield rng.random((64, 32), dtype=np.float32)

    d, g = jnp.zeros(32), jnp.ones(32) / 32
    rng = np.random.default_rng(0)
    source, read_ns, index = batches(rng), 0, 0
    while True:
        asked = time.perf_counter_ns()
        x = next(source, None)
        if x is None:
            break
        if index == 2:  # the steady batches: both calls compiled
            began, read_ns = asked, 0
        read_ns += time.perf_counter_ns() - asked
        d, d_loss = discriminator_step(d, g, x)
        g, g_loss = generator_step(g, d, x)
        index += 1
    share = read_ns / (time.perf_counter_ns() - began)
    print(f"final {{float(d_loss):.6f}} {{float(g_loss):.6f}}")
    print(f"share {{share:.4f}}", file=__import__("sys").stderr)
    """
)


# A timing test: its truth, the loop's own clock, counts every read whole, as if each step were
# done the moment it was dispatched; gpuwhy counts a read from when the step before it is done.
# Alone, the two agree (the steps take microseconds; three runs passed). Beside two pass-1
# workers on two cores gpuwhy read 0.882 and 0.892 against loop clocks of 0.948 and 0.944
# (2026-11-30): there a step's computation, and the helper thread that stamps it done
# (completion.py), wait for a core, so a read's wait starts later.
@pytest.mark.timing
def test_a_jax_gan_s_two_train_calls_a_batch_are_one_step(tmp_path: Path) -> None:
    # Python 3.12: the generator's reads are timed (generator_pulls.py). Once they are, each
    # batch is a step (its read, the discriminator's and the generator's train call), and the
    # read waits from when both calls of the batch before are done.
    python = str(framework_env("py312-jax"))
    stderr: list[str] = []
    phases = _watched_and_bare(tmp_path, GAN_JOB, python, stderr)
    train = phases["train"]
    # Calls of the first batches, before the reads are found and timed, end a step each.
    assert GAN_BATCHES - 1 <= train["steps"] <= GAN_BATCHES + 3, train
    # The truth: the loop's own clock in the same run (a machine loaded by other work slows
    # the watched run's steps and a separate run's unlike).
    truth = stderr[0].split("share ")[-1].split()[0]
    measured = {key: train[key] for key in ("data_wait_fraction", "steps", "steady_steps")}
    assert train["data_wait_fraction"] == pytest.approx(float(truth), abs=0.05), (truth, measured)
