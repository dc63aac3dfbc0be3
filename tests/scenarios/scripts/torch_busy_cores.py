"""A PyTorch loop whose DataLoader items cost CPU, not time asleep: each batch's decoding burns
``--batch-ms`` of the loading thread's CPU beside a step of a few milliseconds, on a machine of
few cores. ``--workers N`` loads in N persistent worker processes; ``--compute-threads 1`` steps
on one thread, as a device would compute apart from the cores the workers take.

Three epochs of ``--steps`` steps; the first is warm-up. Prints one JSON line: the epochs' wall
times, the steady step time (the faster of the later epochs, per step), and each epoch's time
from its second pull on and the part of it spent in `next()`, on the job's own clock.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch.utils.data import DataLoader, Dataset

BATCH = 32


def burn(cpu_s: float) -> int:
    """Spend `cpu_s` of this thread's CPU time (a decoder's work, however the cores are shared)."""
    end, total = time.thread_time() + cpu_s, 0
    while time.thread_time() < end:
        total += sum(i * i for i in range(200))
    return total


class Decoded(Dataset[tuple[torch.Tensor, int]]):
    def __init__(self, steps: int, batch_s: float) -> None:
        self.steps, self.batch_s = steps, batch_s

    def __len__(self) -> int:
        return self.steps * BATCH

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if index % BATCH == 0:  # one batch's decoding, in its first item
            burn(self.batch_s)
        return torch.randn(256), index % 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batch-ms", type=float, default=10.0)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument(
        "--compute-threads", type=int, help="torch's intra-op threads (default: torch's own)"
    )
    args = parser.parse_args()
    if args.compute_threads:
        torch.set_num_threads(args.compute_threads)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10),
    )  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    loader = DataLoader(
        Decoded(args.steps, args.batch_ms / 1000),
        batch_size=BATCH,
        num_workers=args.workers,
        persistent_workers=args.workers > 0,
    )
    epochs, waited, steady = [], [], []
    for _ in range(3):
        waited.append(0.0)
        start = time.perf_counter()
        batches = iter(loader)
        for index in range(args.steps + 1):
            asked = time.perf_counter()
            try:
                inputs, targets = next(batches)
            except StopIteration:
                break
            if index == 1:  # the wait share on its own clock, from the second pull on
                second = asked
            if index >= 1:
                waited[-1] += time.perf_counter() - asked
            optimizer.zero_grad()
            loss_fn(model(inputs), targets).backward()
            optimizer.step()
        end = time.perf_counter()
        epochs.append(end - start)
        steady.append(end - second)
    step_s = min(epochs[1:]) / args.steps
    print(json.dumps({"epoch_s": epochs, "step_s": step_s, "waited": waited, "steady": steady}))


if __name__ == "__main__":
    main()
