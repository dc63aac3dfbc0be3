"""Keras 3 `fit` on the backend KERAS_BACKEND names (torch or jax) with a slow input: a
`keras.utils.PyDataset` whose `__getitem__` waits on slow storage, read one batch at a time.
Fixed: the same dataset read by eight worker threads (`workers=8`), so reading overlaps the
steps. A short warm-up `fit` first, so the timed `fit` is the steady state.
"""

from __future__ import annotations

import os

import jobkit


def main() -> None:
    job = jobkit.start(__doc__)
    import keras
    import numpy as np

    backend = keras.backend.backend()
    job.facts["backend"] = backend
    if backend == "torch":
        jobkit.torch_device(job)
    elif backend == "jax":
        import jax

        job.facts["device"] = str(jax.devices()[0])
    width, batch, steps, read_s = job.size((1024, 256, 200, 0.012), (32, 16, 30, 0.004))
    workers = 8 if job.fixed else 1

    class SlowStorage(keras.utils.PyDataset):
        def __init__(self, batches: int) -> None:
            super().__init__(workers=workers, use_multiprocessing=False)
            self.batches = batches
            self.rng = np.random.default_rng(0)

        def __len__(self) -> int:
            return self.batches

        def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
            jobkit.slow_io(read_s)
            x = np.full((batch, width), index % 7, dtype="float32")
            return x, (np.arange(batch) + index) % 10

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((width,)),
            *[keras.layers.Dense(width, activation="relu") for _ in range(3)],
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    with job.phase("warmup"):
        model.fit(SlowStorage(4), epochs=1, verbose=0)
    profile = (
        jobkit.jax_profile(job) if backend == "jax" else jobkit.torch_profile(job, by_step=False)
    )
    with profile, job.phase("train"):
        model.fit(SlowStorage(steps), epochs=1, verbose=0)
    job.facts.update(
        steps=steps,
        samples=steps * batch,
        batch=batch,
        workers=workers,
        storage_wait_s=round(steps * read_s, 6),
        keras_backend_env=os.environ.get("KERAS_BACKEND"),
    )
    job.write()


if __name__ == "__main__":
    main()
