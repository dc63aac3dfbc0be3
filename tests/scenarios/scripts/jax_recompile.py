"""Scenario: a JAX loop whose jitted step takes its learning rate, a Python number that decays
every ten steps, as a static argument, so JAX compiles the step again at each new rate (known:
ONE_TIME_WORK, its recompiles). `--fast` passes the rate as an array: one compile.

The input is NumPy batches made ahead: nothing but the recompiles tells the variants apart.
"""

from __future__ import annotations

import argparse

BATCHES = 100
BATCH = 32


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast", action="store_true", help="the fix: the rate as an array")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCHES, BATCH, 32)).astype("float32")
    y = rng.normal(size=(BATCHES, BATCH, 1)).astype("float32")
    params = [rng.normal(size=(32, 256)).astype("float32"), np.zeros((256, 1), "float32")]

    def loss(params: list[jax.Array], features: jax.Array, labels: jax.Array) -> jax.Array:
        hidden = jax.nn.relu(features @ params[0])
        return jnp.mean((hidden @ params[1] - labels) ** 2)

    def update(params: list[jax.Array], features: jax.Array, labels: jax.Array, rate: object):
        grads = jax.grad(loss)(params, features, labels)
        return [p - rate * g for p, g in zip(params, grads, strict=True)]

    slow_step = jax.jit(update, static_argnames="rate")  # a new rate: a new compile
    fast_step = jax.jit(update)
    step = 0
    for _ in range(args.epochs):
        for i in range(BATCHES):
            rate = 0.01 * 0.9 ** (step // 10)  # a step schedule
            if args.fast:
                params = fast_step(params, x[i], y[i], rate=np.float32(rate))
            else:
                params = slow_step(params, x[i], y[i], rate=rate)
            step += 1
    jax.block_until_ready(params)


if __name__ == "__main__":
    main()
