"""Input-bound PyTorch: a Dataset whose `__getitem__` waits on slow storage, read by a
`DataLoader` with `num_workers=0`, so the GPU waits for every batch. Fixed: eight worker
processes, pinned memory and non-blocking copies, so reading overlaps the steps.
"""

from __future__ import annotations

import jobkit


def main() -> None:
    job = jobkit.start(__doc__)
    import torch
    from torch.utils.data import DataLoader, Dataset

    device = jobkit.torch_device(job)
    torch.manual_seed(0)
    width, batch, steps, item_s = job.size((1024, 64, 300, 0.0002), (64, 16, 40, 0.0002))

    class SlowStorage(Dataset[tuple[torch.Tensor, int]]):
        def __len__(self) -> int:
            return batch * steps

        def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
            jobkit.slow_io(item_s)
            return torch.full((width,), float(index % 7)), index % 10

    if job.fixed:
        workers = job.size(8, 2)
        loader = DataLoader(
            SlowStorage(),
            batch_size=batch,
            num_workers=workers,
            pin_memory=device == "cuda",
            persistent_workers=True,
            prefetch_factor=4,
        )
    else:
        loader = DataLoader(SlowStorage(), batch_size=batch, num_workers=0)
    model = jobkit.mlp(width, 3, width, 10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    done = 0
    with jobkit.torch_profile(job) as profiled, job.phase("train"):
        for inputs, targets in loader:
            inputs = inputs.to(device, non_blocking=job.fixed)
            targets = targets.to(device, non_blocking=job.fixed)
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model(inputs), targets).backward()
            optimizer.step()
            profiled()
            done += 1
    job.facts.update(
        steps=done,
        samples=done * batch,
        batch=batch,
        storage_wait_s=round(batch * steps * item_s, 6),
        workers=loader.num_workers,
    )
    job.write()


if __name__ == "__main__":
    main()
