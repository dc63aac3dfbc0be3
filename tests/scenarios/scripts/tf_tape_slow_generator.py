"""Scenario: a custom GradientTape loop over a tf.data pipeline built on a slow Python generator
(known: INPUT_BOUND).

The generator stands for a slow Python reader (a fixed delay per batch, so the ground truth does
not depend on CPU contention). `--fast` removes the delay: the input made free, which is what the
INPUT_BOUND what-if models.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator

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
    x = rng.normal(size=(BATCHES, BATCH, 32)).astype("float32")
    y = rng.integers(0, 10, size=(BATCHES, BATCH)).astype("int64")

    def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for i in range(BATCHES):
            if not args.fast:
                time.sleep(DELAY_S)
            yield x[i], y[i]

    ds = tf.data.Dataset.from_generator(
        batches,
        output_signature=(
            tf.TensorSpec((BATCH, 32), tf.float32),
            tf.TensorSpec((BATCH,), tf.int64),
        ),
    )
    # tf.data autotuning off: with it on, TensorFlow 2.21 intermittently blocks the end-of-data
    # pull after a slow generator for seconds (about 9 s in 5 of 11 runs here), a stall of
    # TensorFlow's own that would add noise to the ground truth rather than test the wait.
    options = tf.data.Options()
    options.autotune.enabled = False
    ds = ds.with_options(options)
    model = tf.keras.Sequential(
        [
            tf.keras.Input((32,)),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf.keras.optimizers.Adam()

    @tf.function
    def train_step(features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    for features, labels in ds:
        train_step(features, labels)


if __name__ == "__main__":
    main()
