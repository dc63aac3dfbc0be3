"""Sync-bound PyTorch: the loss is read back with `.item()` and the predictions copied with
`.cpu()` on every step, so the host waits for the GPU each step and the GPU then waits for the
host's next launches. Fixed: the loss summed on the device and read once at the end.
"""

from __future__ import annotations

import jobkit


def main() -> None:
    job = jobkit.start(__doc__)
    import torch

    device = jobkit.torch_device(job)
    torch.manual_seed(0)
    width, batch, steps = job.size((2048, 512, 1500), (64, 16, 60))
    model = jobkit.mlp(width, 4, width, 10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    inputs = torch.randn(batch, width, device=device)
    targets = torch.randint(0, 10, (batch,), device=device)
    seen = 0.0
    total = torch.zeros((), device=device)
    with jobkit.torch_profile(job) as profiled, job.phase("train"):
        for _ in range(steps):
            optimizer.zero_grad(set_to_none=True)
            outputs = model(inputs)
            loss = loss_fn(outputs, targets)
            loss.backward()
            optimizer.step()
            if job.fixed:
                total += loss.detach()
            else:
                seen += loss.item()
                outputs.argmax(dim=1).cpu()
            profiled()
        seen += float(total)
    job.facts.update(
        steps=steps, samples=steps * batch, batch=batch, syncs_per_step=0 if job.fixed else 2
    )
    job.write()


if __name__ == "__main__":
    main()
