"""Pageable host-to-device copies: every step copies a large batch from ordinary (pageable)
host memory, which the driver stages through a bounce buffer at a fraction of the link's speed,
and the step (a linear layer trained on the batch) waits for it. Fixed: the batches in pinned
memory, copied with `non_blocking=True` on a side stream one step ahead, so copies overlap
compute.
"""

from __future__ import annotations

import jobkit


def main() -> None:
    job = jobkit.start(__doc__)
    import torch

    device = jobkit.torch_device(job)
    torch.manual_seed(0)
    rows, width, steps = job.size((16384, 4096, 120), (256, 64, 30))  # 256 MiB a batch on GPU
    pinned = device == "cuda" and job.fixed
    batches = [
        torch.randn(rows, width).pin_memory() if pinned else torch.randn(rows, width)
        for _ in range(2)
    ]
    model = torch.nn.Linear(width, 256).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    copy_stream = torch.cuda.Stream() if pinned else None
    with jobkit.torch_profile(job) as profiled, job.phase("train"):
        if copy_stream is not None:
            with torch.cuda.stream(copy_stream):
                ahead = batches[0].to(device, non_blocking=True)
        for index in range(steps):
            if copy_stream is not None:
                torch.cuda.current_stream().wait_stream(copy_stream)
                current = ahead
                current.record_stream(torch.cuda.current_stream())
                with torch.cuda.stream(copy_stream):
                    ahead = batches[(index + 1) % 2].to(device, non_blocking=True)
            else:
                current = batches[index % 2].to(device)
            # A training step on the batch: what bounds a step for gpuwhy, as in a real loop.
            optimizer.zero_grad(set_to_none=True)
            torch.relu(model(current)).mean().backward()
            optimizer.step()
            profiled()
    job.facts.update(steps=steps, batch_bytes=rows * width * 4, pinned=pinned)
    job.write()


if __name__ == "__main__":
    main()
