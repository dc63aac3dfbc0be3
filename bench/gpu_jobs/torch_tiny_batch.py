"""Launch-bound PyTorch: batches so small that every step is a few microseconds of GPU work
behind tens of microseconds of Python and kernel launches; the GPU idles between kernels.
Fixed: a batch 16× larger over the same samples (16× fewer steps).
"""

from __future__ import annotations

import jobkit


def main() -> None:
    job = jobkit.start(__doc__)
    import torch

    device = jobkit.torch_device(job)
    torch.manual_seed(0)
    samples = job.size(32 * 3000, 4 * 200)
    batch = job.size(32, 4) * (16 if job.fixed else 1)
    steps = samples // batch
    model = jobkit.mlp(256, 3, 256, 10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    data = torch.randn(samples, 256, device=device)
    labels = torch.randint(0, 10, (samples,), device=device)
    with jobkit.torch_profile(job) as profiled, job.phase("train"):
        for index in range(steps):
            inputs = data[index * batch : (index + 1) * batch]
            targets = labels[index * batch : (index + 1) * batch]
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model(inputs), targets).backward()
            optimizer.step()
            profiled()
    job.facts.update(steps=steps, samples=samples, batch=batch)
    job.write()


if __name__ == "__main__":
    main()
