"""A JAX training loop as the Flax and Optax docs write one: a `flax.linen` MLP, an Optax
optimizer, a `jax.jit` train step, batches from

    --input tfdata   a tf.data pipeline with a slow map (10 ms a batch) read through
                     `as_numpy_iterator()`, as the Flax examples feed their loops (tf.data
                     prefetches it beside the step: several times the step's compute, so the
                     loop waits most of its time also where other jobs share its cores)
    --input numpy    a Python generator slicing NumPy arrays; `--read-ms MS` makes it read
                     each batch that long (a sleep standing for storage)
    --input loader   the same reads through a hand-written loader class (`__next__`), as
                     JAX code bases without a framework loader write one

Prints the final loss.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

SAMPLES, BATCH, EPOCHS = 512, 32, 2


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return nn.Dense(2)(nn.relu(nn.Dense(32)(x)))


def numpy_batches(
    x: np.ndarray, y: np.ndarray, read_s: float = 0.0
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    for first in range(0, len(x), BATCH):
        if read_s:
            time.sleep(read_s)
        yield x[first : first + BATCH], y[first : first + BATCH]


class Loader:
    """Batches of the arrays, one per `__next__`, each read `read_s` long."""

    def __init__(self, x: np.ndarray, y: np.ndarray, read_s: float = 0.0) -> None:
        self.x, self.y, self.read_s, self.first = x, y, read_s, 0

    def __iter__(self) -> Loader:
        return self

    def __next__(self) -> tuple[np.ndarray, np.ndarray]:
        first = self.first
        if first >= len(self.x):
            raise StopIteration
        self.first += BATCH
        if self.read_s:
            time.sleep(self.read_s)
        return self.x[first : first + BATCH], self.y[first : first + BATCH]


def tfdata_batches(x: np.ndarray, y: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    import tensorflow as tf

    def slow_read(features: np.ndarray) -> np.ndarray:
        time.sleep(0.010)
        return features

    dataset = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .batch(BATCH)
        .map(lambda f, t: (tf.numpy_function(slow_read, [f], tf.float32), t))
    )
    return dataset.as_numpy_iterator()  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", choices=("tfdata", "numpy", "loader"), required=True)
    parser.add_argument("--read-ms", type=float, default=0.0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.random((SAMPLES, 16), dtype=np.float32)
    y = (x[:, 0] > 0.5).astype(np.int32)
    model = MLP()
    params = model.init(jax.random.PRNGKey(0), jnp.ones((1, 16)))
    optimizer = optax.adam(1e-2)
    opt_state = optimizer.init(params)

    @jax.jit
    def train_step(params, opt_state, features, labels):  # type: ignore[no-untyped-def]
        def loss_fn(params):  # type: ignore[no-untyped-def]
            logits = model.apply(params, features)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss

    read_s = args.read_ms / 1000
    loss = jnp.float32(0.0)
    for _ in range(EPOCHS):
        if args.input == "tfdata":
            batches: Iterator[tuple[np.ndarray, np.ndarray]] = tfdata_batches(x, y)
        elif args.input == "loader":
            batches = Loader(x, y, read_s)
        else:
            batches = numpy_batches(x, y, read_s)
        for features, labels in batches:
            params, opt_state, loss = train_step(params, opt_state, features, labels)
    print(f"final loss {float(loss):.6f}")


if __name__ == "__main__":
    main()
