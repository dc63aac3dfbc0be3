"""Keras 2 `fit` under `tf.distribute.MultiWorkerMirroredStrategy`, as TensorFlow's tutorial
"Multi-worker training with Keras" writes it, on two workers of this machine. (Keras 3 `fit`
does not run under that strategy: tf_keras, with TF_USE_LEGACY_KERAS=1, is what such jobs use.)

Started plainly, it is the launcher: it picks two free ports and starts two copies of itself as
the workers, each with its own `TF_CONFIG` (the cluster and its task index), as a cluster
manager would. Each worker builds and compiles the model inside `strategy.scope()` and fits
over a `tf.data` pipeline whose `map` reads slowly (storage latency, `--read-ms` a batch),
sharded across the workers by the strategy. The launcher prints each worker's final loss, in
worker order, and exits with the first failing worker's code. Each worker stands for a node: the
launcher keeps it to a core of its own where the machine has one for each. Sharing both cores of
a 2-core machine, the workers' steady step over in-memory input took 9.0-15.5 ms from run to
run; each on its own core, 6.6-25 ms over one day (2026-11-29), steady within each run.

    --read-ms MS   how late each batch is read (default 40)
    --epochs N     epochs of 8 steps (default 2)
    --clock        also print each worker's own clock of its steady steps, per step: the first
                   epoch from its first batch's end (that batch traces the train function),
                   each later one from its first batch's start, to its last batch's end
    --free-epochs  epochs (from 0, comma-separated) whose reads are free: the job's own truth
                   of its fix, taken in the same processes as the job as is (--clock then
                   also prints the free epochs' steady steps apart)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

WORKERS, SAMPLES, BATCH_PER_WORKER = 2, 512, 32


def launch(argv: list[str]) -> int:
    ports = []
    for _ in range(WORKERS):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}

    def task(index: int) -> dict[str, object]:
        return {"type": "worker", "index": index}

    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", *argv],
            env={**os.environ, "TF_CONFIG": json.dumps({"cluster": cluster, "task": task(i)})},
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(WORKERS)
    ]
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= WORKERS:  # each worker stands for a node: a core of its own
        for index, worker in enumerate(workers):
            os.sched_setaffinity(worker.pid, {cores[index]})
    outputs = [worker.communicate()[0] for worker in workers]
    for index, output in enumerate(outputs):
        for line in output.splitlines():
            print(f"worker {index}: {line}" if line.startswith("final ") else line)
    return next((worker.returncode for worker in workers if worker.returncode), 0)


def work(read_s: float, epochs: int, clock: bool, free_epochs: frozenset[int]) -> None:
    import numpy as np
    import tensorflow as tf

    keras = tf.keras
    if not keras.__name__.startswith("tf_keras"):
        raise SystemExit(f"Keras 2 expected (TF_USE_LEGACY_KERAS=1), got {keras.__name__}")
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.random((SAMPLES, 16), dtype=np.float32)
    y = (x[:, 0] > 0.5).astype(np.int64)

    batch = BATCH_PER_WORKER * strategy.num_replicas_in_sync  # the global batch
    steps = SAMPLES // batch  # per epoch, each worker reading one batch a step
    reads = [0]  # this worker's reads so far: the epoch of each, even one read ahead

    def slow_read(features: np.ndarray) -> np.ndarray:
        if reads[0] // steps not in free_epochs:
            time.sleep(read_s)
        reads[0] += 1
        return features

    def read(features: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        features = tf.numpy_function(slow_read, [features], tf.float32)
        return tf.ensure_shape(features, [None, 16]), labels

    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch).map(read)
    with strategy.scope():
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
        )
    marks: list[list[float]] = []  # per epoch: its first batch's start, then each batch's end

    class Clock(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch: int, logs: object = None) -> None:
            if batch == 0:
                marks.append([time.perf_counter()])

        def on_train_batch_end(self, batch: int, logs: object = None) -> None:
            marks[-1].append(time.perf_counter())

    history = model.fit(dataset, epochs=epochs, verbose=2, callbacks=[Clock()] if clock else [])
    print(f"final loss {history.history['loss'][-1]:.6f}")
    if free_epochs and reads[0] != epochs * steps:  # the reads' epochs would be wrong
        raise SystemExit(f"{reads[0]} reads in {epochs} epochs of {steps} steps")
    if clock:
        marks[0] = marks[0][1:]  # the first epoch's steady steps begin as its first one ends
        free = [epoch for index, epoch in enumerate(marks) if index in free_epochs]
        for kind, kept in (("", marks), (" free", free)):
            if kept:
                steady_s = sum(epoch[-1] - epoch[0] for epoch in kept)
                per_step = steady_s / sum(len(epoch) - 1 for epoch in kept)
                print(f"final steady{kind} {per_step * 1e3:.3f} ms/step")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--read-ms", type=float, default=40.0)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--clock", action="store_true")
    parser.add_argument("--free-epochs", default="")
    args = parser.parse_args()
    if args.worker:
        free = frozenset(int(epoch) for epoch in args.free_epochs.split(",") if epoch)
        work(args.read_ms / 1e3, args.epochs, args.clock, free)
    else:
        argv = [f"--read-ms={args.read_ms:g}", f"--epochs={args.epochs}"]
        argv += ["--clock"] if args.clock else []
        argv += [f"--free-epochs={args.free_epochs}"] if args.free_epochs else []
        sys.exit(launch(argv))


if __name__ == "__main__":
    main()
