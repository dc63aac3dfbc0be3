"""Scenario: a custom GradientTape loop (or, with `--fit`, one Keras `fit` without validation)
over a tf.data map followed by `cache()`: the first epoch runs the slow map (a fixed delay per
batch, standing for slow storage) and fills the cache, the later epochs read the cache.

The job times itself: each epoch's wall time, its steady part and (the custom loop) the time
that part spent in `next()`, its own clock of the input wait. Prints them as one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

STEPS, EPOCHS, BATCH = 20, 4, 32
DELAY_S = 0.0 if "--no-delay" in sys.argv else 0.01  # --no-delay: the input made free
# --width N: the hidden layer's width; wider, a step computes longer than the slow input takes.
WIDTH = int(sys.argv[sys.argv.index("--width") + 1]) if "--width" in sys.argv else 256


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
        .map(
            lambda a, b: (tf.ensure_shape(tf.numpy_function(slow, [a], tf.float32), [None, 128]), b)
        )
        .cache()
    )
    model = tf.keras.Sequential(
        [
            tf.keras.Input((128,)),
            tf.keras.layers.Dense(WIDTH, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )
    optimizer = tf.keras.optimizers.Adam()
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    if "--fit" in sys.argv:
        print(json.dumps(fit(tf, model, data)))
        return

    @tf.function
    def step(features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    # Per epoch: its wall time, and (as steady_sweep.py's clock does) its steady part, from the
    # second pull's request to the last step's end, with the time those steps spent in `next()`;
    # and its steps, from the first pull's request to the last step's end.
    walls, steady, pulled, stepped = [], [], [], []
    for _ in range(EPOCHS):
        began = time.perf_counter()
        waited, first, second, last_end = 0.0, 0.0, 0.0, 0.0
        iterator = iter(data)
        for index in range(STEPS + 1):
            asked = time.perf_counter()
            first = first or asked
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
        stepped.append(last_end - first)
    print(
        json.dumps(
            {"steps": STEPS, "walls": walls, "steady": steady, "pulled": pulled, "stepped": stepped}
        )
    )


def fit(tf: Any, model: Any, data: Any) -> dict[str, Any]:
    """One `fit` of EPOCHS epochs, timed by a callback: each epoch's wall time, and its steps
    from the second one's (`steady`) or the first one's (`stepped`) begin to the last one's end."""
    walls: list[float] = []
    steady: list[float] = []
    stepped: list[float] = []

    class Clock(tf.keras.callbacks.Callback):  # type: ignore[misc]
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.began = time.perf_counter()

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            if batch == 0:
                self.first = time.perf_counter()
            if batch == 1:
                self.second = time.perf_counter()

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.last_end = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            walls.append(time.perf_counter() - self.began)
            steady.append(self.last_end - self.second)
            stepped.append(self.last_end - self.first)

    model.compile(
        optimizer="adam",
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(data, epochs=EPOCHS, verbose=0, callbacks=[Clock()])
    return {"steps": STEPS, "walls": walls, "steady": steady, "pulled": None, "stepped": stepped}


if __name__ == "__main__":
    main()
