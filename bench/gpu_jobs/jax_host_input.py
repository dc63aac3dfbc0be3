"""JAX loop fed by a host-side pipeline: each batch is made in NumPy with a slow read, then
handed to a jitted step, one after the other, so the device waits for the host. Fixed: a
background thread reads ahead and puts the next batches on the device (`jax.device_put`) while
the current step runs.
"""

from __future__ import annotations

import queue
import threading

import jobkit


def main() -> None:
    job = jobkit.start(__doc__)
    import jax
    import jax.numpy as jnp
    import numpy as np

    device = jax.devices()[0]
    job.facts["device"] = str(device)
    job.use_sync(lambda: jax.block_until_ready(params))
    width, batch, steps, read_s = job.size((2048, 512, 300, 0.01), (64, 16, 40, 0.004))
    key = jax.random.PRNGKey(0)
    params = [jax.random.normal(k, (width, width)) * 0.01 for k in jax.random.split(key, 4)]

    def loss_fn(weights: list[jax.Array], x: jax.Array) -> jax.Array:
        for w in weights:
            x = jax.nn.relu(x @ w)
        return jnp.mean(x * x)

    @jax.jit
    def step(weights: list[jax.Array], x: jax.Array) -> list[jax.Array]:
        grads = jax.grad(loss_fn)(weights, x)
        return [w - 1e-3 * g for w, g in zip(weights, grads, strict=True)]

    def read(index: int) -> np.ndarray:
        jobkit.slow_io(read_s)
        return np.full((batch, width), (index % 7) / 7, dtype=np.float32)

    def batches() -> object:
        if not job.fixed:
            for index in range(steps):
                yield read(index)
            return
        ahead: queue.Queue[object] = queue.Queue(maxsize=8)

        def produce(first: int, stride: int) -> None:
            for index in range(first, steps, stride):
                ahead.put((index, jax.device_put(read(index), device)))

        threads = [threading.Thread(target=produce, args=(i, 4), daemon=True) for i in range(4)]
        for thread in threads:
            thread.start()
        for _ in range(steps):
            yield ahead.get()[1]  # type: ignore[index]

    with job.phase("warmup"):
        params = step(params, jnp.zeros((batch, width)))
    with jobkit.jax_profile(job), job.phase("train"):
        for x in batches():
            params = step(params, x)  # type: ignore[arg-type]
    job.facts.update(
        steps=steps, samples=steps * batch, batch=batch, storage_wait_s=round(steps * read_s, 6)
    )
    job.write()


if __name__ == "__main__":
    main()
