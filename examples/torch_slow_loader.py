"""Example: a PyTorch training whose DataLoader is the bottleneck.

`__getitem__` reads each sample with a fixed delay, as from slow storage, and the DataLoader
runs it in the training process (`num_workers=0`, the default): every step first waits for its
whole batch to be read.

    gpuwhy run -- python examples/torch_slow_loader.py             # diagnose it
    gpuwhy run -- python examples/torch_slow_loader.py --fixed     # the fix gpuwhy proposes
    python examples/compare_fix.py torch_slow_loader.py              # estimate vs measured

`--fixed` loads batches in worker processes while the model trains (`num_workers=4`,
`persistent_workers=True`, `prefetch_factor=2`; `pin_memory` where there is a CUDA device).
About 10-20 s on a 2-core CPU; no GPU needed.
"""

from __future__ import annotations

import argparse
import time
import warnings

READ_DELAY_S = 0.00025  # per sample: the storage's latency, not CPU work
SAMPLES = 16384
BATCH = 256
EPOCHS = 1
WORKERS = 4  # the workers wait on storage, not on the CPU: more of them than cores is right here


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixed", action="store_true", help="load batches in worker processes")
    args = parser.parse_args()
    import torch
    from torch.utils.data import DataLoader, Dataset

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    if not cuda:
        # Without a GPU the CPU computes the model and stands in for the GPU. One compute thread
        # keeps the stand-in honest: it leaves the other cores to the loader's workers, as a GPU
        # would, instead of competing with them.
        torch.set_num_threads(1)

    torch.manual_seed(0)
    features = torch.randn(SAMPLES, 64)
    labels = (features[:, :8].sum(dim=1) > 0).long()

    class SlowStorage(Dataset[tuple[torch.Tensor, torch.Tensor]]):
        def __len__(self) -> int:
            return SAMPLES

        def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
            time.sleep(READ_DELAY_S)
            return features[index], labels[index]

    if args.fixed:
        # torch warns when workers outnumber the cores; these mostly wait, so they may.
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        loader = DataLoader(
            SlowStorage(),
            batch_size=BATCH,
            shuffle=True,
            num_workers=WORKERS,
            persistent_workers=True,
            prefetch_factor=2,
            pin_memory=cuda,
        )
    else:
        loader = DataLoader(SlowStorage(), batch_size=BATCH, shuffle=True)

    model = torch.nn.Sequential(
        torch.nn.Linear(64, 1024),
        torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024),
        torch.nn.ReLU(),
        torch.nn.Linear(1024, 2),
    ).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    start = time.perf_counter()
    loss = torch.tensor(0.0)
    for _ in range(EPOCHS):
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
    wall = time.perf_counter() - start
    print(f"trained {EPOCHS} epochs in {wall:.1f} s, last loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
