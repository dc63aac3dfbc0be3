"""A PyTorch loop over in-memory samples whose reads take, in all, 0.3 s more than they should:

    --extra stall    in one read, partway through (a stall: the process stopped mid-read once)
    --extra spread   a little in every read (a pipeline too slow for its steps)
    --extra gc       none, but one read, partway through, runs a full garbage collection over
                     a million live objects the job holds (prints how long it took: gc_s)

60 steps of a few milliseconds of compute each. Prints the final loss.
"""

from __future__ import annotations

import argparse
import gc
import time

import torch
from torch.utils.data import DataLoader, Dataset

STEPS, BATCH, EXTRA_S = 60, 4, 0.3
STALLED_STEP = 40  # past the first half: no warm-up step (steady.py looks no further)


class Samples(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __init__(self, extra: str) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(STEPS * BATCH, 256, generator=generator)
        self.y = torch.randint(0, 4, (STEPS * BATCH,), generator=generator)
        self.extra = extra
        self.live = [[i] for i in range(1_000_000)] if extra == "gc" else []
        self.gc_s = 0.0

    def __len__(self) -> int:
        return STEPS * BATCH

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.extra == "spread":
            time.sleep(EXTRA_S / (STEPS * BATCH))
        elif index == STALLED_STEP * BATCH and self.extra == "stall":
            time.sleep(EXTRA_S)
        elif index == STALLED_STEP * BATCH:
            start = time.perf_counter()
            gc.collect()
            self.gc_s = time.perf_counter() - start
        return self.x[index], self.y[index]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--extra", choices=("stall", "spread", "gc"), required=True)
    samples = Samples(parser.parse_args().extra)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 4)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss = torch.tensor(0.0)
    for features, labels in DataLoader(samples, batch_size=BATCH):
        for _ in range(8):  # a few ms of compute a step
            loss = torch.nn.functional.cross_entropy(model(features), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    print(f"gc_s {samples.gc_s:.6f}")
    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
