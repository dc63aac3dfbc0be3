"""The job the overhead benchmark runs: a healthy, compute-bound Keras-on-TensorFlow training.

Data in memory behind cache().prefetch(), a model large enough that the steps dominate, a small
validation set. Prints the seconds `fit` took, so the benchmark can separate gpuwhy's cost inside
the job (hooks, sampler) from its start-up and wrap-up.
"""

from __future__ import annotations

import argparse
import os
import time

BATCH = 128


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=60, help="training batches per epoch")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)

    def dataset(batches: int) -> tf.data.Dataset:
        x = rng.normal(size=(batches * BATCH, 256)).astype("float32")
        y = rng.integers(0, 10, size=(batches * BATCH,)).astype("int64")
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).cache().prefetch(2)

    model = tf.keras.Sequential(
        [tf.keras.Input((256,)), tf.keras.layers.Dense(1024, activation="relu"),
         tf.keras.layers.Dense(1024, activation="relu"), tf.keras.layers.Dense(10)]
    )
    model.compile(optimizer="adam",
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    train, validation = dataset(args.batches), dataset(max(args.batches // 10, 1))
    start = time.monotonic()
    model.fit(train, validation_data=validation, epochs=args.epochs, verbose=0, shuffle=False)
    print(f"fit_s={time.monotonic() - start:.3f}", flush=True)


if __name__ == "__main__":
    main()
