"""Scenario: a custom GradientTape loop over a tf.data map followed by `cache()`: the first epoch
runs the slow map (a fixed delay per batch, standing for slow storage) and fills the cache, the
later epochs read the cache.

The job times itself: each epoch's wall time, its steady part and the time that part spent in
`next()` (its own clock of the input wait). Prints them as one JSON line.
"""

from __future__ import annotations

import json
import os
import time

STEPS, EPOCHS, BATCH, DELAY_S = 20, 4, 32, 0.01


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    # One compute thread: the model stands in for a device that computes while the host waits.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(STEPS * BATCH, 128)).astype("float32")
    y = rng.integers(0, 10, size=STEPS * BATCH)

    def slow(features: np.ndarray) -> np.ndarray:
        time.sleep(DELAY_S)
        return features

    data = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .batch(BATCH)
        .map(lambda a, b: (tf.numpy_function(slow, [a], tf.float32), b))
        .cache()
    )
    model = tf.keras.Sequential(
        [
            tf.keras.Input((128,)),
            tf.keras.layers.Dense(256, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )
    optimizer = tf.keras.optimizers.Adam()
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    # Per epoch: its wall time, and (as steady_sweep.py's clock does) its steady part, from the
    # second pull's request to the last step's end, with the time those steps spent in `next()`.
    walls, steady, pulled = [], [], []
    for _ in range(EPOCHS):
        began = time.perf_counter()
        waited, second, last_end = 0.0, 0.0, 0.0
        iterator = iter(data)
        for index in range(STEPS + 1):
            asked = time.perf_counter()
            try:
                features, labels = next(iterator)
            except StopIteration:
                break
            if index >= 1:
                waited += time.perf_counter() - asked
                second = second or asked
            step(features, labels)
            last_end = time.perf_counter()
        walls.append(time.perf_counter() - began)
        steady.append(last_end - second)
        pulled.append(waited)
    print(json.dumps({"steps": STEPS, "walls": walls, "steady": steady, "pulled": pulled}))


if __name__ == "__main__":
    main()
