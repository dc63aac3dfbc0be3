"""JAX's own example of a training loop with nothing but JAX (`examples/
mnist_classifier_fromscratch.py` in the JAX repository): parameters as a list of arrays, a
`jax.jit` update that takes `jax.grad` of the loss, batches pulled with `next()` from a Python
generator that shuffles each epoch. Random MNIST-shaped data (no network here).

    --read-ms MS   each batch takes that long to read (a sleep standing for storage)

Prints the final loss.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np

SAMPLES, BATCH, EPOCHS, STEP_SIZE = 640, 64, 2, 0.01
LAYERS = (784, 64, 10)


def init_params(key: jax.Array) -> list[tuple[jax.Array, jax.Array]]:
    params = []
    for fan_in, fan_out in itertools.pairwise(LAYERS):
        key, w_key, b_key = jax.random.split(key, 3)
        params.append(
            (
                0.1 * jax.random.normal(w_key, (fan_in, fan_out)),
                0.1 * jax.random.normal(b_key, (fan_out,)),
            )
        )
    return params


def predict(params: list[tuple[jax.Array, jax.Array]], inputs: jax.Array) -> jax.Array:
    activations = inputs
    for w, b in params[:-1]:
        activations = jnp.tanh(activations @ w + b)
    w, b = params[-1]
    logits = activations @ w + b
    return logits - jax.scipy.special.logsumexp(logits, axis=1, keepdims=True)


def loss(
    params: list[tuple[jax.Array, jax.Array]], batch: tuple[jax.Array, jax.Array]
) -> jax.Array:
    inputs, targets = batch
    return -jnp.mean(jnp.sum(predict(params, inputs) * targets, axis=1))


@jax.jit
def update(params: list[tuple[jax.Array, jax.Array]], batch: tuple[jax.Array, jax.Array]) -> list:
    grads = jax.grad(loss)(params, batch)
    return [
        (w - STEP_SIZE * dw, b - STEP_SIZE * db)
        for (w, b), (dw, db) in zip(params, grads, strict=True)
    ]


def data_stream(
    images: np.ndarray, labels: np.ndarray, read_s: float
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.RandomState(0)
    while True:
        order = rng.permutation(len(images))
        for first in range(0, len(images), BATCH):
            if read_s:
                time.sleep(read_s)
            chosen = order[first : first + BATCH]
            yield images[chosen], labels[chosen]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--read-ms", type=float, default=0.0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    images = rng.random((SAMPLES, LAYERS[0]), dtype=np.float32)
    labels = np.eye(LAYERS[-1], dtype=np.float32)[rng.integers(0, LAYERS[-1], SAMPLES)]
    batches = data_stream(images, labels, args.read_ms / 1000)
    params = init_params(jax.random.PRNGKey(0))
    for epoch in range(EPOCHS):
        start = time.perf_counter()
        for _ in range(SAMPLES // BATCH):
            params = update(params, next(batches))
        print(f"epoch {epoch} in {time.perf_counter() - start:.2f} s")
    print(f"final loss {float(loss(params, (images, labels))):.6f}")


if __name__ == "__main__":
    main()
