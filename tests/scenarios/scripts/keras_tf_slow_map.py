"""Scenario: Keras on TensorFlow fed by a tf.data pipeline whose map is slow (known: INPUT_BOUND).

The map stands for slow per-batch input work (reading from slow storage: a fixed delay per batch,
so the ground truth does not depend on CPU contention). `--fast` runs the same job with the input
made free — the delay removed — which is what the INPUT_BOUND what-if models.
"""

from __future__ import annotations

import argparse
import os
import time

DELAY_S = 0.025  # per batch
BATCHES = 400
BATCH = 32


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast", action="store_true", help="input made free (no delay)")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    # One compute thread, one op at a time: the model stands in for a device that computes while
    # the host waits. With TensorFlow's thread pools (inside an op, and ops side by side), the
    # workers' wake-up after each input stall would slow the steps of the slow variant only — a
    # CPU artefact a GPU job does not have.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)

    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCHES * BATCH, 32)).astype("float32")
    y = rng.integers(0, 10, size=(BATCHES * BATCH,)).astype("int64")

    def slow_read(features: np.ndarray) -> np.ndarray:
        time.sleep(DELAY_S)
        return features

    def load(features: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        read = tf.numpy_function(slow_read, [features], tf.float32, stateful=True)
        read.set_shape(features.shape)
        return read, labels

    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
    if not args.fast:
        ds = ds.map(load)
    model = tf.keras.Sequential(
        [
            tf.keras.Input((32,)),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(ds, epochs=1, verbose=0, shuffle=False)


if __name__ == "__main__":
    main()
