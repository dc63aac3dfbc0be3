"""A PyTorch loop over in-memory samples whose reads take, in all, 0.3 s more than they should:

    --extra stall    in one read, partway through (a stall: the process stopped mid-read once)
    --extra spread   a little in every read (a pipeline too slow for its steps)

60 steps of a few milliseconds of compute each. Prints the final loss.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

STEPS, BATCH, EXTRA_S = 60, 4, 0.3
STALLED_STEP = 40  # past the first half: no warm-up step (steady.py looks no further)


class Samples(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __init__(self, stall: bool) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(STEPS * BATCH, 256, generator=generator)
        self.y = torch.randint(0, 4, (STEPS * BATCH,), generator=generator)
        self.stall = stall

    def __len__(self) -> int:
        return STEPS * BATCH

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.stall:
            time.sleep(EXTRA_S / (STEPS * BATCH))
        elif index == STALLED_STEP * BATCH:
            time.sleep(EXTRA_S)
        return self.x[index], self.y[index]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--extra", choices=("stall", "spread"), required=True)
    stall = parser.parse_args().extra == "stall"
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 4)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss = torch.tensor(0.0)
    for features, labels in DataLoader(Samples(stall), batch_size=BATCH):
        for _ in range(8):  # a few ms of compute a step
            loss = torch.nn.functional.cross_entropy(model(features), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
