"""Scenario: a `torch.compile`d model trained on batches of eight different sizes (the tail of
variable-length data) with `dynamic=False`, so TorchDynamo compiles it again for each new size
(known: ONE_TIME_WORK, its recompiles). `--fast` compiles it with `dynamic=True`: one compile
takes every size.

The backend is `aot_eager` (TorchDynamo's capture and AOTAutograd's forward and backward, run
eagerly): no C++ compiler is needed, and each compile still takes a few hundred milliseconds.
"""

from __future__ import annotations

import argparse

SIZES = tuple(range(24, 32))  # eight batch sizes: the default recompile limit is eight
BATCHES = 64


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast", action="store_true", help="the fix: dynamic=True")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)  # one compute thread, as the other scenarios
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 1),
    )
    compiled = torch.compile(model, backend="aot_eager", dynamic=bool(args.fast))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [
        (torch.randn(SIZES[i % len(SIZES)], 32), torch.randn(SIZES[i % len(SIZES)], 1))
        for i in range(BATCHES)
    ]
    for _ in range(args.epochs):
        for features, labels in batches:
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(compiled(features), labels)
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
