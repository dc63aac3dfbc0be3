"""Scenario: PyTorch with a slow DataLoader — num_workers=0 and a slow __getitem__
(known: INPUT_BOUND).

__getitem__ stands for slow per-sample reading (a fixed delay, so the ground truth does not depend
on CPU contention). `--fast` removes the delay: the input made free, which is what the
INPUT_BOUND what-if models.
"""

from __future__ import annotations

import argparse
import time

DELAY_S = 0.0008  # per sample
SAMPLES = 12800
BATCH = 32


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast", action="store_true", help="input made free (no delay)")
    args = parser.parse_args()
    import torch
    from torch.utils.data import DataLoader, Dataset

    # One compute thread: the model stands in for a device that computes while the host waits.
    # With a thread pool, the CPU workers' wake-up after each input stall would slow the steps
    # of the slow variant only — a CPU artefact a GPU job does not have.
    torch.set_num_threads(1)

    torch.manual_seed(0)
    features = torch.randn(SAMPLES, 32)
    labels = torch.randint(0, 10, (SAMPLES,))

    class SlowDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
        def __len__(self) -> int:
            return SAMPLES

        def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
            if not args.fast:
                time.sleep(DELAY_S)
            return features[index], labels[index]

    loader = DataLoader(SlowDataset(), batch_size=BATCH, shuffle=True, num_workers=0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    optimizer = torch.optim.Adam(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
