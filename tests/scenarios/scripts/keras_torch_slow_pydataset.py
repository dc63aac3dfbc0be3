"""Scenario: Keras 3 on the PyTorch backend fed by a slow PyDataset (known: INPUT_BOUND).

__getitem__ stands for slow batch reading (a fixed delay, so the ground truth does not depend on
CPU contention). `--fast` removes the delay: the input made free, which is what the INPUT_BOUND
what-if models.
"""

from __future__ import annotations

import argparse
import os
import time

DELAY_S = 0.025  # per batch
BATCHES = 400
BATCH = 32


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast", action="store_true", help="input made free (no delay)")
    args = parser.parse_args()
    os.environ["KERAS_BACKEND"] = "torch"
    import keras
    import numpy as np
    import torch

    # One compute thread: the model stands in for a device that computes while the host waits.
    # With a thread pool, the CPU workers' wake-up after each input stall would slow the steps
    # of the slow variant only — a CPU artefact a GPU job does not have.
    torch.set_num_threads(1)

    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCHES, BATCH, 32)).astype("float32")
    y = rng.integers(0, 10, size=(BATCHES, BATCH)).astype("int64")

    class SlowBatches(keras.utils.PyDataset):
        def __len__(self) -> int:
            return BATCHES

        def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
            if not args.fast:
                time.sleep(DELAY_S)
            return x[index], y[index]

    model = keras.Sequential(
        [keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)]
    )
    model.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    model.fit(SlowBatches(), epochs=1, verbose=0)


if __name__ == "__main__":
    main()
