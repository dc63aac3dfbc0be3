"""Scenario: Keras on TensorFlow validating every epoch on a set far larger than the training set
(known: SLOW_VALIDATION).

`--fast` applies the fix SLOW_VALIDATION's what-if models: `validation_freq=EPOCHS`, validating
once at the end instead of after every epoch.
"""

from __future__ import annotations

import argparse
import os

EPOCHS = 3
TRAIN_BATCHES = 25
VALIDATION_BATCHES = 1000
BATCH = 64


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast", action="store_true", help="validate once, at the end")
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

    def dataset(batches: int) -> tf.data.Dataset:
        x = rng.normal(size=(batches * BATCH, 64)).astype("float32")
        y = rng.integers(0, 10, size=(batches * BATCH,)).astype("int64")
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).cache().prefetch(2)

    train, validation = dataset(TRAIN_BATCHES), dataset(VALIDATION_BATCHES)
    model = tf.keras.Sequential(
        [
            tf.keras.Input((64,)),
            tf.keras.layers.Dense(256, activation="relu"),
            tf.keras.layers.Dense(256, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(
        train,
        validation_data=validation,
        epochs=EPOCHS,
        validation_freq=EPOCHS if args.fast else 1,
        verbose=0,
        shuffle=False,
    )


if __name__ == "__main__":
    main()
