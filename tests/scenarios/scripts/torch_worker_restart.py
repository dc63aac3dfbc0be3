"""Scenario: PyTorch DataLoader workers started again every epoch (known: ONE_TIME_WORK).

Short epochs over a `DataLoader(num_workers=2)` without `persistent_workers`: each epoch starts
two fresh worker processes (spawned, as on macOS and Windows and with CUDA), and its first step
waits for them. The input itself is fast. `--fast` keeps the workers between epochs
(`persistent_workers=True`), the fix ONE_TIME_WORK proposes: the workers start once.
"""

from __future__ import annotations

import argparse

EPOCHS = 5
SAMPLES = 2048
BATCH = 64


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast", action="store_true", help="persistent_workers=True")
    args = parser.parse_args()
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    # One compute thread: the model stands in for a device that computes while the host waits.
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(SAMPLES, 128), torch.randint(0, 10, (SAMPLES,)))
    loader = DataLoader(
        data,
        batch_size=BATCH,
        shuffle=True,
        num_workers=2,
        persistent_workers=args.fast,
        multiprocessing_context="spawn",
    )
    model = torch.nn.Sequential(
        torch.nn.Linear(128, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
    )
    optimizer = torch.optim.Adam(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(EPOCHS):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()


if __name__ == "__main__":
    main()
