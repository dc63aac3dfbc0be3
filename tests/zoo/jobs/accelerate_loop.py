"""A PyTorch loop made device-agnostic with Hugging Face Accelerate, as its quick tour writes
it: `Accelerator()`, `prepare(model, optimizer, loader)`, `accelerator.backward(loss)`, and an
evaluation loop with `gather_for_metrics`. Runs as `python` or under `accelerate launch`.
Prints the final evaluation loss.
"""

from __future__ import annotations

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

TRAIN, EVALUATE, BATCH, EPOCHS = 256, 256, 32, 2
WIDTH = 2048  # a step that costs far more than fetching its in-memory batch (and Accelerate's
# bookkeeping around each fetch)


def data(count: int, seed: int) -> DataLoader:  # type: ignore[type-arg]
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, 16, generator=generator)
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=BATCH)


def main() -> None:
    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, WIDTH),
        torch.nn.ReLU(),
        torch.nn.Linear(WIDTH, WIDTH),
        torch.nn.ReLU(),
        torch.nn.Linear(WIDTH, 2),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer, train_loader, eval_loader = accelerator.prepare(
        model, optimizer, data(TRAIN, 1), data(EVALUATE, 2)
    )
    loss = torch.tensor(0.0)
    for _ in range(EPOCHS):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
        model.eval()
        losses = []
        for x, y in eval_loader:
            with torch.no_grad():
                logits = model(x)
            losses.append(
                accelerator.gather_for_metrics(
                    torch.nn.functional.cross_entropy(logits, y, reduction="none")
                )
            )
        loss = torch.cat(losses).mean()
    accelerator.print(f"final evaluation loss {float(loss):.6f}")


if __name__ == "__main__":
    main()
