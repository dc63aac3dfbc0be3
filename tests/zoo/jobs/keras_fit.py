"""A Keras 3 classifier as the Keras examples train one (keras.io, "Simple MNIST convnet"):
`fit` on NumPy arrays with `validation_data` and the usual callbacks, then `evaluate`. The
backend is Keras's own choice: set KERAS_BACKEND (tensorflow, torch, jax).

    --out DIR   where ModelCheckpoint keeps the best model (best.keras)

EarlyStopping asks for an improvement of 10 in validation loss, which no epoch makes: training
stops after its second of five epochs, as a real run stops when it plateaus. Random
MNIST-shaped data (no network here). Prints the final validation loss.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import keras
import numpy as np

TRAIN, VALIDATE, BATCH = 512, 512, 64


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.random((TRAIN + VALIDATE, 28, 28, 1), dtype=np.float32)
    y = keras.utils.to_categorical(rng.integers(0, 10, TRAIN + VALIDATE), 10)
    model = keras.Sequential(
        [
            keras.Input(shape=(28, 28, 1)),
            keras.layers.Conv2D(8, kernel_size=(3, 3), activation="relu"),
            keras.layers.MaxPooling2D(pool_size=(2, 2)),
            keras.layers.Flatten(),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
    callbacks = [
        keras.callbacks.ModelCheckpoint(str(args.out / "best.keras"), save_best_only=True),
        keras.callbacks.EarlyStopping(monitor="val_loss", min_delta=10.0, patience=1),
    ]
    model.fit(
        x[:TRAIN],
        y[:TRAIN],
        batch_size=BATCH,
        epochs=5,
        validation_data=(x[TRAIN:], y[TRAIN:]),
        callbacks=callbacks,
        verbose=2,
    )
    loss, _ = model.evaluate(x[TRAIN:], y[TRAIN:], batch_size=BATCH, verbose=0)
    print(f"final validation loss {loss:.6f}")


if __name__ == "__main__":
    main()
