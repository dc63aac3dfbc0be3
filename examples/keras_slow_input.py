"""Example: a Keras (TensorFlow) training whose input pipeline is the bottleneck.

Each batch is "read" with a fixed delay, as from slow storage or a remote bucket, in a `map`
that runs one batch at a time — the most common reason a GPU sits idle during training.

    gpuwhy run --html keras_slow_input.html -- python examples/keras_slow_input.py
    gpuwhy run -- python examples/keras_slow_input.py --fixed     # the fix gpuwhy proposes
    python examples/compare_fix.py keras_slow_input.py              # estimate vs measured

`--fixed` applies the tf.data fix gpuwhy proposes: read batches in parallel
(`num_parallel_calls=tf.data.AUTOTUNE`), keep what was read (`cache()`: the data fits in
memory), and prepare the next batches while the model trains on this one (`prefetch`).
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
    model.compile(
        optimizer="adam",
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    start = time.perf_counter()
    # shuffle=False: a tf.data dataset brings its own order (Keras warns about the default).
    history = model.fit(ds, epochs=EPOCHS, verbose=0, shuffle=False)
    wall = time.perf_counter() - start
    accuracy = history.history["accuracy"][-1]
    print(f"trained {EPOCHS} epochs in {wall:.1f} s, accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
