"""Healthy control: a compute-bound PyTorch loop, data already on the device, the loss read back
every 50 steps. On an H100 the GPU should be busy ≥ 90 % of the loop; gpuwhy must report no
bottleneck. `--fixed` changes nothing (a control has nothing to fix): its pairs measure the
run-to-run spread.
"""

from __future__ import annotations

import jobkit


def main() -> None:
    job = jobkit.start(__doc__)
    import torch

    device = jobkit.torch_device(job)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(0)
    width, batch, steps = job.size((4096, 2048, 1500), (128, 32, 40))
    model = jobkit.mlp(width, 4, width, 10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    inputs = torch.randn(batch, width, device=device)
    targets = torch.randint(0, 10, (batch,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return loss

    with job.phase("warmup"):
        for _ in range(5):
            step()
    with jobkit.torch_profile(job) as profiled, job.phase("train"):
        for index in range(steps):
            loss = step()
            profiled()
            if index % 50 == 0:
                loss.item()
    job.facts.update(steps=steps, samples=steps * batch, batch=batch)
    job.write()


if __name__ == "__main__":
    main()
