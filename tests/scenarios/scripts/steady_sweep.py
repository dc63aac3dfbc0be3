"""Scenario family: one training job, many input pipelines, each against its compute.

    python steady_sweep.py LOOP INPUT [--delay-ms D] [--width W] [--steps N] [--epochs E]
                           [--rounds R]

LOOP: `fit` (Keras on TensorFlow), `tape` (a `GradientTape` loop in a `tf.function`), `torch`
(a PyTorch loop) or `jax` (a `jax.jit` train step, dispatched asynchronously: the loop reads its
next batch while the step computes). INPUT says how each batch is made, taking D ms (a fixed
sleep, slow storage, no CPU: the truth does not hinge on CPU contention; all but `burn2`):

- `map`: a `tf.data` map, one batch at a time, nothing ahead (serial);
- `prefetch`: the same map with `prefetch(1)`: the next batch is made while the step computes;
- `parallel`: the map with two calls in flight and `prefetch(2)`;
- `generator`: `tf.data.Dataset.from_generator` over a Python generator (jax: the Python
  generator itself, which gpuwhy times from Python 3.12 on);
- `numpy` (jax): the serial map read through `as_numpy_iterator()`, as Flax examples do;
- `native`: the serial pipeline slowed by tf.data's own C++ sleep (no Python in the input, no
  interpreter lock: the native-op twin of `map`, whose delay is a `numpy_function`);
- `loader0` / `loader2` / `loader4` (torch): a `DataLoader` over a slow `__getitem__`, in the
  loop's process or in two or four persistent worker processes;
- `burn2` (torch): two persistent workers whose every batch *computes* for D ms (a decode): the
  input competes for the cores the step computes on, unlike every other kind, which sleeps.

In each of R rounds the job trains three times, alternating (the machine's load drifts
slowly; a round's runs share it): *slow*, the input as built; *fast*, the input made free (the
same batches, no delay: the fix INPUT_BOUND models); *hooked*, the slow input with gpuwhy's hooks.
The truth comes from the job's own clock over each epoch's steady steps, from the start of its
second step to the end of its last (the first step of each epoch is start-up, paid alike with
and without the fix): wait share = 1 - fast / slow, the phase's speed-up = slow / fast.
Measured: what gpuwhy's analysis makes of the hooked run's spans, all of them (the steady steps
are gpuwhy's to find): the phase's data-wait fraction and INPUT_BOUND's `phase_speedup`.
Prints one JSON line: truth and measured (medians), and the paired errors (medians over rounds
of measured - truth, and of measured / truth - 1). Plain loops also time each `next()` of the
hooked run's steady steps themselves: `blocked` is that share of their time, `blocked_error`
the median of gpuwhy's share minus it, run by run. One compute thread: the model stands in for
a device that computes while the host waits. The JAX loop's own clock around `next()` is not
reported: its reads overlap the dispatched step, and only the part after the step finished is
a wait.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

BATCH = 64
FEATURES = 256
BATCHES = 32  # distinct batches, cycled


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("loop", choices=("fit", "tape", "torch", "jax"))
    parser.add_argument(
        "input",
        choices=(
            "map",
            "prefetch",
            "parallel",
            "native",
            "generator",
            "numpy",
            "loader0",
            "loader2",
            "loader4",
            "burn2",
        ),
    )
    parser.add_argument("--delay-ms", type=float, default=10.0)
    parser.add_argument("--width", type=int, default=512, help="hidden units: the compute")
    parser.add_argument("--steps", type=int, default=40, help="steps per epoch")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    makers = {"torch": _torch, "jax": _jax}
    train = makers.get(args.loop, _tensorflow)(args)
    for fast in (False, True):  # trace, compile, start workers and caches: before any clock
        train(fast)
    if args.loop == "fit":
        _hooked(train)  # Keras's loop for the hooked runs is compiled under the hooks
    walls: dict[str, list[float]] = {"slow": [], "fast": [], "hooked": []}
    measured: list[tuple[float, float]] = []
    blocked: list[float] = []  # plain loops: the job's own share of steady time spent in next()
    for _ in range(args.rounds):
        walls["slow"].append(train(False))
        walls["fast"].append(train(True))
        wall, share, speedup = _hooked(train)
        walls["hooked"].append(wall)
        measured.append((share, speedup))
        if _Steady.last is not None and _Steady.last.pulls:
            blocked.append(_Steady.last.blocked_s / wall)
    print(json.dumps(_summary(args, walls, measured, blocked)), flush=True)


def _hooked(train: Callable[..., float]) -> tuple[float, float, float]:
    """The slow run under gpuwhy's hooks: its steady wall, and what gpuwhy's analysis says of
    its "train" phase (data-wait fraction, INPUT_BOUND's phase_speedup)."""
    from constructed import phase_stats

    from gpuwhy.analysis import whatif
    from gpuwhy.hooks import auto, emitter
    from gpuwhy.model import Span

    spans: list[Span] = []
    emitter.configure(lambda batch: spans.extend(r for r in batch if isinstance(r, Span)))
    auto.install({})
    begin = time.monotonic_ns()
    try:
        wall = train(False, hooked=True)
    finally:
        end = time.monotonic_ns()
        emitter.flush(5.0)
        auto.uninstall()
        emitter.configure(None)
    phase = phase_stats(spans, begin, end)["train"]
    speedup = whatif.phase_speedup(phase.steady_time_s or 0.0, phase.steady_data_wait_s)
    return wall, phase.data_wait_fraction or 0.0, speedup


def _summary(
    args: argparse.Namespace,
    walls: dict[str, list[float]],
    measured: list[tuple[float, float]],
    blocked: list[float],
) -> dict[str, object]:
    median = {k: statistics.median(v) for k, v in walls.items()}
    pairs = list(zip(walls["slow"], walls["fast"], measured, strict=True))
    # In the same hooked run, gpuwhy's share against the job's own clock around each `next()`:
    # no second run, so nothing of the machine's drift between runs.
    own = [m[0] - b for m, b in zip(measured, blocked, strict=False)] if blocked else None
    return {
        "loop": args.loop,
        "input": args.input,
        "delay_ms": args.delay_ms,
        "step_ms_fast": median["fast"] / ((args.steps - 1) * args.epochs) * 1e3,
        "truth": 1 - median["fast"] / median["slow"],
        "measured": statistics.median(m[0] for m in measured),
        "error": statistics.median(m[0] - (1 - f / s) for s, f, m in pairs),
        "speedup_truth": median["slow"] / median["fast"],
        "speedup_measured": statistics.median(m[1] for m in measured),
        "speedup_error": statistics.median(m[1] / (s / f) - 1 for s, f, m in pairs),
        "overhead": median["hooked"] / median["slow"] - 1,
        "blocked": statistics.median(blocked) if blocked else None,
        "blocked_error": statistics.median(own) if own else None,
        "walls": walls,
    }


class _Steady:
    """Each epoch from its second step's start to its last step's end, summed; in a plain loop
    also the time those steps spent in `next()` (`pulls`: how many were timed)."""

    last: _Steady | None = None  # the clock of the latest run

    def __init__(self) -> None:
        self.total_s = 0.0
        self.blocked_s = 0.0
        self.pulls = 0
        self._from: float | None = None
        _Steady.last = self

    def step_begins(self, index: int) -> None:
        if index == 1:
            self._from = time.perf_counter()

    def pulled(self, index: int, seconds: float) -> None:
        if index >= 1:
            self.blocked_s += seconds
            self.pulls += 1

    def epoch_ends(self) -> None:
        if self._from is not None:
            self.total_s += time.perf_counter() - self._from
        self._from = None


def _tensorflow(args: argparse.Namespace) -> Callable[..., float]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    # One compute thread, one op at a time: a stand-in for a device (the scenario scripts say why).
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCHES, BATCH, FEATURES)).astype("float32")
    y = rng.integers(0, 10, size=(BATCHES, BATCH)).astype("int64")
    datasets = {
        fast: _tf_input(tf, args.input, x, y, 0.0 if fast else args.delay_ms / 1000, args.steps)
        for fast in (False, True)
    }
    model = tf.keras.Sequential(
        [
            tf.keras.Input((FEATURES,)),
            tf.keras.layers.Dense(args.width, activation="relu"),
            tf.keras.layers.Dense(args.width, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if args.loop == "fit":
        model.compile(optimizer="adam", loss=loss_fn)
        # The hooked runs train a twin compiled under the hooks, as `gpuwhy run` compiles every
        # model (a loop compiled without them has no in-graph stamps: its wait is unknown).
        twin = tf.keras.models.clone_model(model)
        twin.compile(optimizer="adam", loss=loss_fn)

        def fit(fast: bool, hooked: bool = False) -> float:
            steady = _Steady()

            class Clock(tf.keras.callbacks.Callback):
                def on_train_batch_begin(self, batch: int, logs: object = None) -> None:
                    steady.step_begins(batch)

                def on_epoch_end(self, epoch: int, logs: object = None) -> None:
                    steady.epoch_ends()

            (twin if hooked else model).fit(
                datasets[fast], epochs=args.epochs, verbose=0, callbacks=[Clock()]
            )
            return steady.total_s

        return fit
    optimizer = tf.keras.optimizers.Adam()

    @tf.function
    def train_step(features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    def loop(fast: bool, hooked: bool = False) -> float:
        steady = _Steady()
        for _ in range(args.epochs):
            _epoch(datasets[fast], lambda batch: train_step(*batch), steady)
        return steady.total_s

    return loop


def _epoch(
    data: Iterable[Any],
    step: Callable[[Any], object],
    steady: _Steady,
    finish: Callable[[], object] | None = None,
) -> None:
    """One epoch of a plain loop; a step begins at its request for its batch. `finish`: wait
    for the last dispatched step (the epoch ends when its work is done); its reads are then
    not the loop's own clock's (they overlap compute)."""
    iterator = iter(data)
    index = 0
    while True:
        steady.step_begins(index)
        asked = time.perf_counter()
        try:
            batch = next(iterator)
        except StopIteration:
            break
        if finish is None:
            steady.pulled(index, time.perf_counter() - asked)
        step(batch)
        index += 1
    if finish is not None:
        finish()
    steady.epoch_ends()


def _tf_input(tf: object, kind: str, x: object, y: object, delay: float, steps: int) -> object:
    import numpy as np

    def slow_read(features: np.ndarray) -> np.ndarray:
        if delay:
            time.sleep(delay)
        return features

    def load(features: object, labels: object) -> tuple[object, object]:
        read = tf.numpy_function(slow_read, [features], tf.float32, stateful=True)  # type: ignore[attr-defined]
        read.set_shape(features.shape)  # type: ignore[attr-defined]
        return read, labels

    if kind == "generator":

        def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
            for i in range(steps):
                if delay:
                    time.sleep(delay)
                yield x[i % BATCHES], y[i % BATCHES]  # type: ignore[index]

        dataset = tf.data.Dataset.from_generator(  # type: ignore[attr-defined]
            batches,
            output_signature=(
                tf.TensorSpec((BATCH, FEATURES), tf.float32),  # type: ignore[attr-defined]
                tf.TensorSpec((BATCH,), tf.int64),  # type: ignore[attr-defined]
            ),
        )
    else:
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().take(steps)  # type: ignore[attr-defined]
        if kind == "native":
            from tensorflow.python.data.experimental.ops import testing

            if delay:
                dataset = dataset.apply(testing.sleep(int(delay * 1e6)))
        else:
            calls = 2 if kind == "parallel" else None
            dataset = dataset.map(load, num_parallel_calls=calls)
            if kind in ("prefetch", "parallel"):
                dataset = dataset.prefetch(2 if kind == "parallel" else 1)
    # Autotuning off: each setting does what it says (with it on, tf.data may add a buffer).
    options = tf.data.Options()  # type: ignore[attr-defined]
    options.autotune.enabled = False
    return dataset.with_options(options)


def _jax(args: argparse.Namespace) -> Callable[..., float]:
    # One compute thread (XLA's CPU client otherwise splits each op over the cores).
    os.environ.setdefault(
        "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    )
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCHES, BATCH, FEATURES)).astype("float32")
    y = rng.integers(0, 10, size=(BATCHES, BATCH)).astype("int32")
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    sizes = [(FEATURES, args.width), (args.width, args.width), (args.width, 10)]
    params = [jax.random.normal(k, s) * 0.05 for k, s in zip(keys, sizes, strict=True)]

    def loss_of(params: list[Any], features: Any, labels: Any) -> Any:
        h = features
        for w in params[:-1]:
            h = jax.nn.relu(h @ w)
        logits = h @ params[-1]
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(labels.shape[0]), labels])

    def compiled() -> Callable[..., tuple[list[Any], Any]]:
        """The train step, compiled anew for each run: gpuwhy sees only functions compiled
        while its hooks are in (a cached compilation is never traced again)."""

        def train_step(params: list[Any], features: Any, labels: Any) -> tuple[list[Any], Any]:
            loss, grads = jax.value_and_grad(loss_of)(params, features, labels)
            return [p - 0.01 * g for p, g in zip(params, grads, strict=True)], loss

        return jax.jit(train_step)  # type: ignore[no-any-return]

    def batches(delay: float) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for i in range(args.steps):
            if delay:
                time.sleep(delay)  # storage
            yield x[i % BATCHES], y[i % BATCHES]

    def data(fast: bool) -> Iterable[Any]:
        delay = 0.0 if fast else args.delay_ms / 1000
        if args.input == "numpy":
            import tensorflow as tf

            dataset = _tf_input(tf, "map", x, y.astype("int64"), delay, args.steps)
            return dataset.as_numpy_iterator()  # type: ignore[attr-defined, no-any-return]
        return batches(delay)

    state: dict[str, Any] = {"params": params}

    def step(batch: tuple[Any, Any]) -> None:
        state["params"], _ = state["step"](state["params"], *batch)

    def loop(fast: bool, hooked: bool = False) -> float:
        steady = _Steady()
        state["step"] = compiled()
        for _ in range(args.epochs):
            _epoch(data(fast), step, steady, lambda: jax.block_until_ready(state["params"]))
        return steady.total_s

    return loop


def _torch(args: argparse.Namespace) -> Callable[..., float]:
    import torch
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(BATCHES, BATCH, FEATURES)
    y = torch.randint(0, 10, (BATCHES, BATCH))

    class Batches(Dataset[tuple[torch.Tensor, torch.Tensor]]):
        def __init__(self, delay: float) -> None:
            self.delay = delay

        def __len__(self) -> int:
            return int(args.steps)

        def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
            if self.delay and args.input == "burn2":
                until = time.perf_counter() + self.delay
                while time.perf_counter() < until:  # a decode: CPU, not storage
                    pass
            elif self.delay:
                time.sleep(self.delay)
            return x[index % BATCHES], y[index % BATCHES]

    workers = {"loader2": 2, "loader4": 4, "burn2": 2}.get(args.input, 0)
    loaders = {
        fast: DataLoader(
            Batches(0.0 if fast else args.delay_ms / 1000),
            batch_size=None,
            num_workers=workers,
            persistent_workers=workers > 0,
        )
        for fast in (False, True)
    }
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, args.width),
        torch.nn.ReLU(),
        torch.nn.Linear(args.width, args.width),
        torch.nn.ReLU(),
        torch.nn.Linear(args.width, 10),
    )
    optimizer = torch.optim.Adam(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        optimizer.zero_grad()
        loss_fn(model(batch[0]), batch[1]).backward()
        optimizer.step()

    def loop(fast: bool, hooked: bool = False) -> float:
        steady = _Steady()
        for _ in range(args.epochs):
            _epoch(loaders[fast], step, steady)
        return steady.total_s

    return loop


if __name__ == "__main__":
    main()
