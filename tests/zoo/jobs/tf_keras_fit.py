"""Keras 2 as TensorFlow 2 jobs written before Keras 3 still run it: `tf.keras` with
TF_USE_LEGACY_KERAS=1 (the tf_keras package), `fit` over a `tf.data` pipeline whose `map`
reads slowly (storage latency, 10 ms a batch), `validation_data`, ModelCheckpoint to HDF5 and
EarlyStopping, then `evaluate`, and `predict` over the training data. Prints the final
validation loss. The validation data is as large as the training data, so `evaluate`'s ten steps
are a sixth of the run's steps: INPUT_BOUND holds back a wait that is a sliver of the repeated
work (< 5 % of all phases' steady time), and five steps put this phase on that edge. The read
is long enough that a stall of this machine (~0.1 s in one step of a loaded CI run) cannot move
a phase across that edge: at 3 ms a batch the whole steady run was 0.25 s, and `evaluate` (0.03 s
of wait) once lost its finding on a loaded machine.

    --out DIR   where ModelCheckpoint keeps the best model (best.h5)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

TRAIN, VALIDATE, BATCH, EPOCHS = 320, 320, 32, 2


def slow_read(features: np.ndarray) -> np.ndarray:
    time.sleep(0.010)
    return features


def pipeline(x: np.ndarray, y: np.ndarray) -> tf.data.Dataset:
    def read(features: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        features = tf.numpy_function(slow_read, [features], tf.float32)
        return tf.ensure_shape(features, [None, 16]), labels

    return tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).map(read)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    keras = tf.keras
    if not keras.__name__.startswith("tf_keras"):
        raise SystemExit(f"Keras 2 expected (TF_USE_LEGACY_KERAS=1), got {keras.__name__}")
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.random((TRAIN + VALIDATE, 16), dtype=np.float32)
    y = (x[:, 0] > 0.5).astype(np.int64)
    train, validate = pipeline(x[:TRAIN], y[:TRAIN]), pipeline(x[TRAIN:], y[TRAIN:])
    model = keras.Sequential(
        [
            keras.Input((16,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(2),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    callbacks = [
        keras.callbacks.ModelCheckpoint(str(args.out / "best.h5"), save_best_only=True),
        keras.callbacks.EarlyStopping(monitor="val_loss", patience=3),
    ]
    model.fit(train, epochs=EPOCHS, validation_data=validate, callbacks=callbacks, verbose=2)
    loss, _ = model.evaluate(validate, verbose=0)
    model.predict(train, verbose=0)
    print(f"final validation loss {loss:.6f}")


if __name__ == "__main__":
    main()
