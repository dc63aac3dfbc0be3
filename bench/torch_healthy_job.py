"""The PyTorch job the overhead benchmark runs: a healthy, compute-bound training loop.

Data in memory behind a plain `DataLoader` (the batches are ready long before the step wants
them), a model large enough that the steps dominate, the loss read back every 20 steps as
well-behaved loops do. Prints the seconds the training loop took, so the benchmark can separate
gpuwhy's cost inside the job (hooks, sampler) from its start-up and wrap-up.

    python bench/torch_healthy_job.py [--batches 120] [--epochs 3]
"""

from __future__ import annotations

import argparse
import time

BATCH = 128


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=120, help="training batches per epoch")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(args.batches * BATCH, 256)
    y = torch.randint(0, 10, (args.batches * BATCH,))
    loader = DataLoader(TensorDataset(x, y), batch_size=BATCH, shuffle=True)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 1024),
        torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024),
        torch.nn.ReLU(),
        torch.nn.Linear(1024, 10),
    ).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    start = time.monotonic()
    for _ in range(args.epochs):
        for step, (inputs, targets) in enumerate(loader):
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
            if step % 20 == 0:
                loss.item()
    print(f"fit_s={time.monotonic() - start:.3f}", flush=True)


if __name__ == "__main__":
    main()
