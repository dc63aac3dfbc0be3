"""Plain loops under the hooks, in an interpreter of their own (as a job runs them):

    python loop_time_job.py {tfdata,tfgen,tfheld0,tfheld50,loader0,loader2}

Runs three epochs of one loop — a tf.data dataset with a slow map or over a generator, or a torch
DataLoader with 0 or 2 workers — each epoch timed by the loop's own clock around its `for`
statement, and prints one JSON line: those clocks (`walls`) and the "train" phases the hooks sent
(`phases`). `tfheldMS`: the code after the loop holds its iterator MS milliseconds, and lets
go of it when it makes the next one.
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


def loop_walls(make: Callable[[], Iterable[Any]]) -> list[tuple[int, int]]:
    walls = []
    for _ in range(EPOCHS):
        data = make()
        start = time.monotonic_ns()
        for _batch in data:
            time.sleep(0.002)  # the step's compute
        walls.append((start, time.monotonic_ns()))
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


def main() -> None:
    collected = Collected()
    emitter.configure(collected)
    auto.install({})
    kind = sys.argv[1]
    if kind.startswith("loader"):
        make = loader(int(kind.removeprefix("loader")))
    else:
        make = tfgen() if kind == "tfgen" else tfdata()
    if kind.startswith("tfheld"):
        walls = held_walls(make, float(kind.removeprefix("tfheld")) / 1000)
    else:
        walls = loop_walls(make)
    phases = [(s.start_ns, s.end_ns) for s in collected.spans(SpanKind.PHASE, "train")]
    print(json.dumps({"walls": walls, "phases": phases}))


if __name__ == "__main__":
    main()
