"""Keras `fit` under `tf.distribute.MirroredStrategy`, as the TensorFlow guide "Distributed
training with Keras" writes it: the model built and compiled inside `strategy.scope()`, a
batched `tf.data` dataset scaled by the replica count. On a machine without GPUs the strategy
has one CPU replica. Prints the final loss.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

SAMPLES, BATCH_PER_REPLICA, EPOCHS = 512, 32, 2


def main() -> None:
    tf.keras.utils.set_random_seed(0)
    strategy = tf.distribute.MirroredStrategy()
    batch = BATCH_PER_REPLICA * strategy.num_replicas_in_sync
    rng = np.random.default_rng(0)
    x = rng.random((SAMPLES, 16), dtype=np.float32)
    y = (x[:, 0] > 0.5).astype(np.int64)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)
    with strategy.scope():
        model = tf.keras.Sequential(
            [
                tf.keras.Input((16,)),
                tf.keras.layers.Dense(32, activation="relu"),
                tf.keras.layers.Dense(2),
            ]
        )
        model.compile(
            optimizer="adam",
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
    history = model.fit(dataset, epochs=EPOCHS, verbose=2)
    print(f"final loss {history.history['loss'][-1]:.6f}")


if __name__ == "__main__":
    main()
