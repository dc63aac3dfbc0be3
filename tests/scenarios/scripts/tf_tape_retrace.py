"""Scenario: a custom GradientTape loop whose `tf.function` is given a Python number every step
(a decaying weight for the loss), so TensorFlow traces it again at every call (known:
ONE_TIME_WORK, its retracing). `--fast` passes the same number as a tensor: one trace.

The input is an in-memory `tf.data` pipeline: nothing but the retracing tells the variants apart.
"""

from __future__ import annotations

import argparse
import os

BATCHES = 120
BATCH = 32


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast", action="store_true", help="the fix: a tensor")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")  # TensorFlow's own retracing warning, once per call here
    # One compute thread, as the other scenarios: steps of a device the host waits for.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCHES * BATCH, 32)).astype("float32")
    y = rng.integers(0, 10, size=(BATCHES * BATCH,)).astype("int64")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).prefetch(2)
    model = tf.keras.Sequential(
        [
            tf.keras.Input((32,)),
            tf.keras.layers.Dense(256, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf.keras.optimizers.SGD(0.01)

    @tf.function
    def train_step(features: tf.Tensor, labels: tf.Tensor, weight: float) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = weight * loss_fn(labels, model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    step = 0
    for _ in range(args.epochs):
        for features, labels in ds:
            weight = 0.999**step  # a new Python float every step
            train_step(features, labels, tf.constant(weight) if args.fast else weight)
            step += 1


if __name__ == "__main__":
    main()
