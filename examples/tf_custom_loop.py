"""Example: a custom TensorFlow training loop (GradientTape) whose tf.data input is too slow.

Each batch is "read" with a fixed delay, as from slow storage, in a `map` that runs one batch
at a time, while the loop waits for it. gpuwhy needs no code change to see the loop's steps and
the time each waits for its batch.

    gpuwhy run -- python examples/tf_custom_loop.py             # diagnose it
    gpuwhy run -- python examples/tf_custom_loop.py --fixed     # the fix gpuwhy proposes
    python examples/compare_fix.py tf_custom_loop.py              # estimate vs measured

`--fixed`: parallel reads (`num_parallel_calls=tf.data.AUTOTUNE`), `cache()` (the data fits in
memory) and `prefetch`, so the next batch is ready when the step asks for it.
About 20-25 s on a 2-core CPU; no GPU needed.
"""

from __future__ import annotations

import argparse
import os
import time

READ_DELAY_S = 0.1  # per batch: the storage's latency, not CPU work; 5-10 times a step's
# compute on a 2-core CPU. The fix reads two batches at a time there, so its first epoch, which
# fills the cache, still waits ~40 % of its time with two other jobs on those cores (~50 ms a step)
BATCHES = 40
BATCH = 128
EPOCHS = 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixed", action="store_true", help="parallel reads, cache, prefetch")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up chatter out
    import numpy as np
    import tensorflow as tf

    if not tf.config.list_physical_devices("GPU"):
        # Without a GPU the CPU computes the model and stands in for the GPU. One compute thread
        # and one op at a time keep the stand-in honest: TensorFlow's thread pools (inside an
        # op, and ops side by side) fall asleep while a step waits for its input, and the next
        # step then runs ~1.5x slower (4.8 ms back to back, 7.2-7.8 ms after 10-50 ms idle, on
        # this model and a 2-core CPU), which no GPU does.
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)

    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCHES * BATCH, 64)).astype("float32")
    y = (x[:, :8].sum(axis=1) > 0).astype("int64")

    def read_from_storage(features: np.ndarray) -> np.ndarray:
        time.sleep(READ_DELAY_S)
        return features

    def load(features: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        read = tf.numpy_function(read_from_storage, [features], tf.float32, stateful=True)
        read.set_shape(features.shape)
        return read, labels

    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
    if args.fixed:
        ds = ds.map(load, num_parallel_calls=tf.data.AUTOTUNE).cache().prefetch(tf.data.AUTOTUNE)
    else:
        ds = ds.map(load)

    model = tf.keras.Sequential(
        [
            tf.keras.Input((64,)),
            tf.keras.layers.Dense(1024, activation="relu"),
            tf.keras.layers.Dense(1024, activation="relu"),
            tf.keras.layers.Dense(2),
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

    start = time.perf_counter()
    loss = tf.constant(0.0)
    for _ in range(EPOCHS):
        for features, labels in ds:
            loss = train_step(features, labels)
    wall = time.perf_counter() - start
    print(f"trained {EPOCHS} epochs in {wall:.1f} s, last loss {float(loss):.3f}")


if __name__ == "__main__":
    main()
