"""Scenario: a healthy, compute-bound Keras-on-TensorFlow job (the control: no runtime problem).

The data sits in memory behind `cache().prefetch()`, the model is large enough that the steps'
compute dominates, and validation is small. `--fast` is accepted for symmetry and changes nothing.
"""

from __future__ import annotations

import argparse
import os

EPOCHS = 2
TRAIN_BATCHES = 40
VALIDATION_BATCHES = 4
BATCH = 128


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast", action="store_true", help="no effect: the control")
    parser.parse_args()
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
        x = rng.normal(size=(batches * BATCH, 256)).astype("float32")
        y = rng.integers(0, 10, size=(batches * BATCH,)).astype("int64")
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).cache().prefetch(2)

    model = tf.keras.Sequential(
        [
            tf.keras.Input((256,)),
            tf.keras.layers.Dense(1024, activation="relu"),
            tf.keras.layers.Dense(1024, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(
        dataset(TRAIN_BATCHES),
        validation_data=dataset(VALIDATION_BATCHES),
        epochs=EPOCHS,
        verbose=0,
        shuffle=False,
    )


if __name__ == "__main__":
    main()
