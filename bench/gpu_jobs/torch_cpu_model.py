"""Model left on the CPU: a GPU is visible, but the model and its batches never move to it (no
`.to("cuda")`), so training runs on the CPU while the GPU idles. Fixed: model and batches on the
GPU.
"""

from __future__ import annotations

import jobkit


def main() -> None:
    job = jobkit.start(__doc__)
    import torch

    available = jobkit.torch_device(job)
    device = available if job.fixed else "cpu"
    torch.manual_seed(0)
    width, batch, steps = job.size((1024, 256, 100), (64, 16, 40))
    model = jobkit.mlp(width, 4, width, 10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    host_inputs = torch.randn(batch, width)
    host_targets = torch.randint(0, 10, (batch,))
    with jobkit.torch_profile(job) as profiled, job.phase("train"):
        for _ in range(steps):
            inputs, targets = host_inputs.to(device), host_targets.to(device)
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model(inputs), targets).backward()
            optimizer.step()
            profiled()
    job.facts.update(
        steps=steps,
        samples=steps * batch,
        batch=batch,
        model_device=device,
        cpu_threads=torch.get_num_threads(),
    )
    job.write()


if __name__ == "__main__":
    main()
