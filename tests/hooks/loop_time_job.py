"""Plain loops under the hooks, in an interpreter of their own (as a job runs them):

    python loop_time_job.py {tfdata,tfgen,tfheld0,tfheld50,loader0,loader2,streamend}

Runs three epochs of one loop — a tf.data dataset with a slow map or over a generator, or a torch
DataLoader with 0 or 2 workers — each epoch timed by the loop's own clock around its `for`
statement, and prints one JSON line: those clocks (`walls`), when each epoch's last step's own
work ended (`tails`), the "train" phases the hooks sent (`phases`) and their waits (`waits`:
start, end, steps). `tfheldMS`: the code after the loop holds its iterator MS milliseconds, and
lets go of it when it makes the next one. `streamend`: a DataLoader over an IterableDataset with 2
workers whose shards are uneven and whose end of data takes `END_S` (closing a remote shard).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from hookspans import Collected

from gpuwhy.hooks import auto, emitter
from gpuwhy.model import SpanKind

EPOCHS = 3
END_S = 0.3  # `streamend`: how long a worker's shard takes to say "no more"


def loop_walls(make: Callable[[], Iterable[Any]], tails: list[int]) -> list[tuple[int, int]]:
    """Each epoch's (start, end) by the loop's clock; `tails` gets when its last step's work
    ended (from there to the end, the loop waited for its data's end)."""
    walls = []
    for _ in range(EPOCHS):
        data = make()
        start = time.monotonic_ns()
        for _batch in data:
            time.sleep(0.002)  # the step's compute
            tail = time.monotonic_ns()
        walls.append((start, time.monotonic_ns()))
        tails.append(tail)
    return walls


def held_walls(make: Callable[[], Iterable[Any]], hold_s: float) -> list[tuple[int, int]]:
    """The code after each loop holds its iterator `hold_s`, then makes the next one (which lets
    go of it)."""
    walls = []
    iterator: Any = None
    for _ in range(EPOCHS):
        start = time.monotonic_ns()
        iterator = iter(make())
        for _batch in iterator:
            time.sleep(0.002)
        walls.append((start, time.monotonic_ns()))
        time.sleep(hold_s)
    iterator = None  # the last loop's iterator goes after its hold: at once, its loop's own
    if not hold_s:
        walls[-1] = (walls[-1][0], time.monotonic_ns())
    return walls


def tfdata() -> Callable[[], Iterable[Any]]:
    import numpy as np
    import tensorflow as tf

    def read(value: np.ndarray) -> np.ndarray:
        time.sleep(0.003)  # slow storage
        return value

    dataset = tf.data.Dataset.range(20).map(
        lambda i: tf.numpy_function(read, [tf.ones((8, 4)) * tf.cast(i, tf.float32)], tf.float32)
    )
    return lambda: dataset


def tfgen() -> Callable[[], Iterable[Any]]:
    import numpy as np
    import tensorflow as tf

    def batches() -> Any:
        for i in range(20):
            time.sleep(0.003)
            yield np.full((8, 4), i, np.float32)

    dataset = tf.data.Dataset.from_generator(
        batches, output_signature=tf.TensorSpec((8, 4), tf.float32)
    )
    return lambda: dataset


def loader(workers: int) -> Callable[[], Iterable[Any]]:
    import torch

    class Slow(torch.utils.data.Dataset):  # type: ignore[misc]
        def __len__(self) -> int:
            return 20

        def __getitem__(self, index: int) -> Any:
            time.sleep(0.003)
            return torch.ones(4)

    # A new DataLoader iterator every epoch: workers start with it and stop at its end.
    context = {"multiprocessing_context": "fork"} if workers else {}
    data = torch.utils.data.DataLoader(Slow(), batch_size=None, num_workers=workers, **context)
    return lambda: data


def stream_end() -> Callable[[], Iterable[Any]]:
    import torch

    class Shards(torch.utils.data.IterableDataset):  # type: ignore[misc]
        """Worker 0 reads 12 items, worker 1 reads 8; each shard's end takes END_S."""

        def __iter__(self) -> Any:
            worker = torch.utils.data.get_worker_info()
            count = 12 if worker is None or worker.id == 0 else 8
            for _ in range(count):
                time.sleep(0.003)
                yield torch.ones(4)
            time.sleep(END_S)

    context = {"multiprocessing_context": "fork"}
    data = torch.utils.data.DataLoader(Shards(), batch_size=None, num_workers=2, **context)
    return lambda: data


def main() -> None:
    collected = Collected()
    emitter.configure(collected)
    auto.install({})
    kind = sys.argv[1]
    if kind.startswith("loader"):
        make = loader(int(kind.removeprefix("loader")))
    elif kind == "streamend":
        make = stream_end()
    else:
        make = tfgen() if kind == "tfgen" else tfdata()
    tails: list[int] = []
    if kind.startswith("tfheld"):
        walls = held_walls(make, float(kind.removeprefix("tfheld")) / 1000)
    else:
        walls = loop_walls(make, tails)
    phases = [(s.start_ns, s.end_ns) for s in collected.spans(SpanKind.PHASE, "train")]
    waits = [(s.start_ns, s.end_ns, s.steps) for s in collected.spans(SpanKind.WAIT, "train")]
    print(json.dumps({"walls": walls, "tails": tails, "phases": phases, "waits": waits}))


if __name__ == "__main__":
    main()
