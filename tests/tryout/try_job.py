"""A training job for `gpuwhy try`'s tests: slow input by default, or edited by hand.

    python try_job.py --loop {keras,tape,torch} [--hand SETTING ...] [--healthy] [--out DIR]
                      [--batch N] [--timing FILE]

Each batch is read with a fixed delay (storage latency, not CPU work, so the truth does not
depend on how busy the cores are) in the input stage `gpuwhy try` can change: a torch
`Dataset` read a batch at a time (`__getitems__`, one wait in proportion to the samples), or a
tf.data `map` per batch. `--hand` applies a fix by hand,
exactly as `gpuwhy try` applies it in-process: `num_workers=4`, `persistent_workers`,
`parallel_map`, `prefetch`; `--batch` sets the batch size (a tf.data read costs the same
whatever the batch holds, a torch one per sample). `--healthy` removes the delay and makes the
model larger: a compute-bound control. With `--out`, the job keeps its outputs as a real one
does: a log line at start, a checkpoint at each epoch's end, a result file at the end. With
`--timing`, it writes its own clock's figure: seconds per batch (and per sample) of its batches
after batch `SKIP` (the truth `gpuwhy try` is checked against).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

DELAY_S = 0.03  # per batch, in tf.data's map
# Per batch in the torch Dataset: four workers then make a batch each 10 ms, slower than the
# step's ~6 ms of compute, so the fixed job stays input-bound with room to spare and its truth
# is the reads' (with 30 ms, 7.5 ms a batch against 6-8 ms of compute that grows when the cores
# are busy: the truth's rounds spread from 3.9x to 4.7x beside one CPU burner).
TORCH_DELAY_S = 0.04
BATCHES = 40  # per epoch
EPOCHS = 2
BATCH = 64
SKIP = 5  # batches of warm-up left out of the job's own figure, as `gpuwhy try --skip 5` does
MEASURED = BATCHES * EPOCHS - SKIP  # the rest: `gpuwhy try --steps` to measure the whole job


class Clock:
    """The ends of the job's batches, on its own clock.

    Its figure is over every batch after the first `SKIP`, an epoch's first included: with its
    whole job as `gpuwhy try`'s budget (`--skip 5 --steps 75`), a try measures the same batches,
    and an epoch's start (a tf.data iterator made, persistent loader workers handed the new
    epoch's indices) weighs on both alike. A try's window inside the first epoch alone missed
    how the second ran: the fixed torch job's 4 workers, started together for the second epoch,
    took 10.1-13.7 ms a batch there against 9.8-10.0 ms in the first (2026-11-30)."""

    def __init__(self) -> None:
        self.ends: list[float] = []

    def batch_done(self, *_: object, **__: object) -> None:
        self.ends.append(time.perf_counter())

    def write(self, path: Path | None, batch: int) -> None:
        steady = [self.ends[i] - self.ends[i - 1] for i in range(SKIP, len(self.ends))]
        if path is None or not steady:
            return
        per_batch = sum(steady) / len(steady)
        figures = {"per_batch_s": per_batch, "per_sample_s": per_batch / batch}
        path.write_text(json.dumps({**figures, "batches": len(self.ends)}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loop", choices=("keras", "tape", "torch"), required=True)
    parser.add_argument("--hand", action="append", default=[])
    parser.add_argument("--healthy", action="store_true")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--timing", type=Path)
    parser.add_argument("--batch", type=int, default=BATCH)
    args = parser.parse_args()
    clock = Clock()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        with open(args.out / "log.txt", "a") as log:
            log.write(f"started {args.loop}\n")
    delay = 0.0 if args.healthy else TORCH_DELAY_S if args.loop == "torch" else DELAY_S
    width = 1536 if args.healthy else 512
    if args.loop == "torch":
        _torch(args, delay, width, clock)
    else:
        _tensorflow(args, delay, width, clock)
    clock.write(args.timing, args.batch)
    if args.out is not None:
        (args.out / "result.txt").write_text("trained\n")


def _torch(args: argparse.Namespace, delay: float, width: int, clock: Clock) -> None:
    import torch
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)  # the CPU stands in for a GPU: one compute thread (examples/)
    torch.manual_seed(0)
    features = torch.randn(BATCHES * BATCH, 64)
    labels = (features[:, 0] > 0).long()

    class SlowStorage(Dataset[tuple[torch.Tensor, torch.Tensor]]):
        def __len__(self) -> int:
            return len(features)

        def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
            return self.__getitems__([index])[0]

        def __getitems__(self, indices: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
            # One read a batch, as from storage: one wait of the batch's latency, not 64
            # sleeps that each wait for a core when the cores are busy (docs above).
            if delay:
                time.sleep(delay / BATCH * len(indices))
            return [(features[index], labels[index]) for index in indices]

    options: dict[str, object] = {}
    if "num_workers=4" in args.hand:
        options["num_workers"] = 4
    if "persistent_workers" in args.hand:
        options["persistent_workers"] = True
    loader = DataLoader(SlowStorage(), batch_size=args.batch, shuffle=True, **options)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, 2),
    )
    optimizer = torch.optim.Adam(model.parameters())
    for _ in range(EPOCHS):
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            clock.batch_done()
        if args.out is not None:
            torch.save(model.state_dict(), args.out / "checkpoint.pt")


def _tensorflow(args: argparse.Namespace, delay: float, width: int, clock: Clock) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCHES * BATCH, 64)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")

    def read(features: np.ndarray) -> np.ndarray:
        if delay:
            time.sleep(delay)
        return features

    def load(features: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        got = tf.numpy_function(read, [features], tf.float32, stateful=True)
        got.set_shape(features.shape)
        return got, labels

    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch)
    parallel = tf.data.AUTOTUNE if "parallel_map" in args.hand else None
    ds = ds.map(load, num_parallel_calls=parallel)
    if "prefetch" in args.hand:
        ds = ds.prefetch(tf.data.AUTOTUNE)
    model = tf.keras.Sequential(
        [
            tf.keras.Input((64,)),
            tf.keras.layers.Dense(width, activation="relu"),
            tf.keras.layers.Dense(width, activation="relu"),
            tf.keras.layers.Dense(2),
        ]
    )
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if args.loop == "keras":
        model.compile(optimizer="adam", loss=loss)
        callbacks: list[tf.keras.callbacks.Callback] = [
            tf.keras.callbacks.LambdaCallback(on_train_batch_end=clock.batch_done)
        ]
        if args.out is not None:
            path = str(args.out / "checkpoint.weights.h5")
            callbacks.append(tf.keras.callbacks.ModelCheckpoint(path, save_weights_only=True))
        model.fit(ds, epochs=EPOCHS, verbose=0, shuffle=False, callbacks=callbacks)
        return
    optimizer = tf.keras.optimizers.Adam()

    @tf.function
    def step(features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            value = loss(labels, model(features, training=True))
        optimizer.apply_gradients(
            zip(
                tape.gradient(value, model.trainable_variables),
                model.trainable_variables,
                strict=True,
            )
        )
        return value

    for _ in range(EPOCHS):
        for features, labels in ds:
            step(features, labels).numpy()  # the batch's end, on the job's clock
            clock.batch_done()
        if args.out is not None:
            model.save_weights(str(args.out / "checkpoint.weights.h5"))


if __name__ == "__main__":
    main()
