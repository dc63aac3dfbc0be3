"""A TensorFlow custom training loop as the TensorFlow guide writes one ("Writing a training
loop from scratch"): `tf.GradientTape` inside a `tf.function` train step, a `tf.data` pipeline
with a slow `map` (storage latency, 10 ms a batch) and `prefetch`, metrics reset per epoch.
Prints the final loss.
"""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf

SAMPLES, BATCH, EPOCHS = 640, 32, 2


def slow_read(features: np.ndarray) -> np.ndarray:
    time.sleep(0.010)  # 3 ms read 0.25 of the steps beside other tests: their compute grew
    return features


def main() -> None:
    tf.keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.random((SAMPLES, 16), dtype=np.float32)
    y = (x[:, 0] > 0.5).astype(np.int64)
    dataset = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .batch(BATCH)
        .map(lambda f, t: (tf.numpy_function(slow_read, [f], tf.float32), t))
    )
    model = tf.keras.Sequential(
        [
            tf.keras.Input((16,)),
            tf.keras.layers.Dense(32, activation="relu"),
            tf.keras.layers.Dense(2),
        ]
    )
    optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    accuracy = tf.keras.metrics.SparseCategoricalAccuracy()

    @tf.function
    def train_step(features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = model(features, training=True)
            loss = loss_fn(labels, logits)
        grads = tape.gradient(loss, model.trainable_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_weights, strict=True))
        accuracy.update_state(labels, logits)
        return loss

    loss = tf.constant(0.0)
    for epoch in range(EPOCHS):
        for features, labels in dataset:
            loss = train_step(features, labels)
        print(f"epoch {epoch}: accuracy {float(accuracy.result()):.4f}")
        accuracy.reset_state()
    print(f"final loss {float(loss):.6f}")


if __name__ == "__main__":
    main()
