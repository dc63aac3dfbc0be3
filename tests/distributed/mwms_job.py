"""A TensorFlow MultiWorkerMirroredStrategy job for the tests: two workers on this machine.

Started plainly, it is the launcher: it picks two free ports on 127.0.0.1 and starts two copies
of itself as the workers, each with its own `TF_CONFIG` (the cluster, and its task index), as a
cluster manager would. Each worker stands for a node: it keeps to a core of its own where the
machine has two. Sharing both, the two workers' step with no slow input varied from 6.8 to
13.5 ms between runs (2-core machine, 2026-11-28); each on its own, 5.3-6.6 ms.

Each worker runs a custom training loop (`strategy.run` inside a `tf.function`, the gradient
all-reduced across the workers) over `strategy.experimental_distribute_dataset`; each replica's
step first transforms its batch `--work` times through a 2048-wide layer of fixed weights (its
compute: ~17 ms a step at 2 on that machine, 9-40 ms on others), or as many times as take
`--compute-ms` on this machine (each worker times a layer; they take their mean count).
Worker `--slow-worker` reads each batch `--read-ms` late (a `py_function` in its `map`), except
the batches of `--free-steps` (ranges of steps from 0, as `12-19,32-39`): those it reads free,
the fix as it would run, the job's own truth of its fix in the same processes. Each worker
writes `OUT/worker{index}.json` with the steps it ran and its own clock of its steady steps (from
the first step's end, which traced the step function, to the last's, per step), and of its free
steps past the first two of each range (by then the batches read ahead before the range are used
up).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BATCH = 64


def launch(argv: list[str]) -> int:
    ports = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", *argv],
            env={
                **os.environ,
                "TF_CONFIG": json.dumps(
                    {"cluster": cluster, "task": {"type": "worker", "index": i}}
                ),
            },
        )
        for i in range(2)
    ]
    return max(worker.wait() for worker in workers)


def work(args: argparse.Namespace) -> None:
    import tensorflow as tf

    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= 2:
        os.sched_setaffinity(0, {cores[index % len(cores)]})
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    read_s = args.read_ms / 1000 if index == args.slow_worker else 0.0
    free = _steps(args.free_steps)
    reads = [0]  # the slow worker's reads so far: the step of each, even one read ahead

    def slow_read(batch: tf.Tensor) -> tf.Tensor:
        if reads[0] not in free:
            time.sleep(read_s)
        reads[0] += 1
        return batch

    def read(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        if read_s:
            x = tf.py_function(slow_read, [x], tf.float32)
            x.set_shape((None, 16))
        return x, y

    # The global batch is split between the workers: each runs `steps` steps of BATCH / 2.
    features = tf.random.stateless_normal((BATCH * args.steps, 16), seed=(1, 2))
    labels = tf.cast(tf.reduce_sum(features, 1) > 0, tf.int32)
    data = tf.data.Dataset.from_tensor_slices((features, labels)).batch(BATCH).map(read)
    with strategy.scope():
        weights = tf.Variable(tf.zeros((16, 2)))
    width = 2048
    spread = tf.random.stateless_normal((16, width), seed=(3, 4)) / 4
    square = tf.random.stateless_normal((width, width), seed=(5, 6)) / width**0.5
    gather = tf.random.stateless_normal((width, 16), seed=(7, 8)) / width**0.5
    batches = strategy.experimental_distribute_dataset(data)
    layers = args.work if args.compute_ms is None else _layers(strategy, square, args.compute_ms)

    @tf.function
    def step(batch: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        def replica(b: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
            x, y = b
            hidden = tf.tanh(x @ spread)
            for _ in range(layers):
                hidden = tf.tanh(hidden @ square)
            x = x + hidden @ gather
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(y, x @ weights)
                )
            grad = tf.distribute.get_replica_context().all_reduce(
                "sum", tape.gradient(loss, weights)
            )
            weights.assign_sub(0.1 * grad)
            return loss

        return strategy.run(replica, args=(batch,))

    steps = 0
    ends = []
    for batch in batches:
        step(batch)
        steps += 1
        ends.append(time.perf_counter())
    steady_s = (ends[-1] - ends[0]) / (steps - 1)
    free_steps = [i for i in range(1, steps) if {i, i - 1, i - 2} <= free]
    free_s = [ends[i] - ends[i - 1] for i in free_steps]
    args.out.mkdir(parents=True, exist_ok=True)
    mark = {
        "index": index,
        "steps": steps,
        "steady_s_per_step": steady_s,
        "free_s_per_step": sum(free_s) / len(free_s) if free_s else None,
        "layers": layers,
    }
    (args.out / f"worker{index}.json").write_text(json.dumps(mark))


def _layers(strategy: Any, square: Any, compute_ms: float) -> int:
    """How many of the 2048-wide layers take about `compute_ms` on a replica's batch here: a
    layer's median time over a few calls on this worker's core; the workers' mean count, up."""
    import tensorflow as tf

    hidden = tf.random.stateless_normal((BATCH // 2, square.shape[0]), seed=(9, 10))
    layer = tf.function(lambda h: tf.tanh(h @ square))
    layer(hidden)  # traced
    times = []
    for _ in range(9):
        start = time.perf_counter()
        layer(hidden).numpy()
        times.append(time.perf_counter() - start)
    mine = tf.constant(max(round(compute_ms / 1000 / statistics.median(times)), 1))
    counts = strategy.run(lambda: tf.identity(mine))
    total = int(strategy.reduce(tf.distribute.ReduceOp.SUM, counts, axis=None))
    return math.ceil(total / strategy.num_replicas_in_sync)


def _steps(ranges: str) -> frozenset[int]:
    """`12-19,32-39` as the steps it names."""
    steps: set[int] = set()
    for part in filter(None, ranges.split(",")):
        first, _, last = part.partition("-")
        steps.update(range(int(first), int(last or first) + 1))
    return frozenset(steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=40, help="steps each worker runs")
    parser.add_argument("--slow-worker", type=int, default=1)
    parser.add_argument("--read-ms", type=float, default=40.0)
    parser.add_argument("--work", type=int, default=2, help="compute: 2048-wide layers a step")
    parser.add_argument(
        "--compute-ms", type=float, help="compute: as many layers as take this long here"
    )
    parser.add_argument("--free-steps", default="", help="steps whose slow reads are free")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.worker:
        work(args)
    else:
        sys.exit(launch(sys.argv[1:]))


if __name__ == "__main__":
    main()
