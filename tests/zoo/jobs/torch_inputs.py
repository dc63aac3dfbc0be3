"""A PyTorch training loop over the input shapes real jobs use, each reading slowly (storage
latency: 2 ms a sample) so that the loop waits for its input:

    --input workers    DataLoader over a map-style Dataset, num_workers=2 (fork)
    --input spawn      the same with the spawn start method: workers start a new interpreter
    --input iterable   an IterableDataset, each worker reading its own shard (get_worker_info)
    --input generator  a Python generator of batches, no DataLoader
    --accumulate K     gradient accumulation: an optimizer step every K batches
    --gan              a GAN's loop: a discriminator's and a generator's optimizer step on
                       each batch (the discriminator tells the batch from the generator's)
    --fail-in-epoch N  raise partway through epoch N (a job that exits non-zero)
    --read-ms MS       each sample's read in this process (default 2; workers read 2 ms)

Prints the final loss, which is the same with or without anything watching the job.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

SAMPLES, BATCH, EPOCHS = 256, 16, 2
READ_S = 0.002


def sample(index: int) -> tuple[torch.Tensor, torch.Tensor]:
    time.sleep(READ_S)
    generator = torch.Generator().manual_seed(index)
    features = torch.randn(32, generator=generator)
    return features, (features[:4].sum() > 0).long()


class Records(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return sample(index)


class Stream(IterableDataset[tuple[torch.Tensor, torch.Tensor]]):
    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for index in range(start, SAMPLES, step):
            yield sample(index)


def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    for first in range(0, SAMPLES, BATCH):
        pairs = [sample(i) for i in range(first, first + BATCH)]
        yield torch.stack([x for x, _ in pairs]), torch.stack([y for _, y in pairs])


def train_gan(loader: object) -> None:
    """Two optimizer steps on each batch, as the DCGAN example's loop takes them."""
    critic = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    maker = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))
    critic_steps = torch.optim.Adam(critic.parameters(), lr=1e-3)
    maker_steps = torch.optim.Adam(maker.parameters(), lr=1e-3)
    bce = torch.nn.BCEWithLogitsLoss()
    real_loss = made_loss = torch.tensor(0.0)
    for _ in range(EPOCHS):
        source = batches() if loader is None else loader
        for features, _labels in source:  # type: ignore[attr-defined]
            noise = torch.randn(len(features), 8)
            made = maker(noise)
            critic_steps.zero_grad()
            real_loss = bce(critic(features), torch.ones(len(features), 1))
            real_loss = real_loss + bce(critic(made.detach()), torch.zeros(len(features), 1))
            real_loss.backward()
            critic_steps.step()
            maker_steps.zero_grad()
            made_loss = bce(critic(made), torch.ones(len(features), 1))
            made_loss.backward()
            maker_steps.step()
    print(f"final losses {real_loss.item():.6f} {made_loss.item():.6f}")


def make_input(kind: str) -> object:
    if kind == "generator":
        return None
    if kind == "iterable":
        # Each worker yields whole batches of its own shard: 2 workers x 8 batches.
        return DataLoader(Stream(), batch_size=BATCH, num_workers=2)
    context = "spawn" if kind == "spawn" else "fork"
    return DataLoader(Records(), batch_size=BATCH, num_workers=2, multiprocessing_context=context)


def main() -> None:
    global READ_S
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--input", choices=("workers", "spawn", "iterable", "generator"), required=True
    )
    parser.add_argument("--accumulate", type=int, default=1)
    parser.add_argument("--gan", action="store_true")
    parser.add_argument("--fail-in-epoch", type=int)
    parser.add_argument("--read-ms", type=float, default=READ_S * 1000)
    args = parser.parse_args()
    READ_S = args.read_ms / 1000  # the reads of this process, as the command line says
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = make_input(args.input)
    loss = torch.tensor(0.0)
    if args.gan:
        train_gan(loader)
        return
    for epoch in range(EPOCHS):
        source = batches() if loader is None else loader
        for index, (features, labels) in enumerate(source):
            if args.fail_in_epoch == epoch and index == 3:
                raise RuntimeError(f"diverged in epoch {epoch}")
            loss = torch.nn.functional.cross_entropy(model(features), labels)
            (loss / args.accumulate).backward()
            if (index + 1) % args.accumulate == 0:
                optimizer.step()
                optimizer.zero_grad()
    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
