"""Slow validation: each epoch's validation copies every prediction to the host and scores it
sample by sample in Python, behind a validation loader that reads slowly; training itself is
healthy. Fixed: the metric computed on the device, the validation data read ahead of time.
"""

from __future__ import annotations

import jobkit


def main() -> None:
    job = jobkit.start(__doc__)
    import torch

    device = jobkit.torch_device(job)
    torch.manual_seed(0)
    width, batch, train_steps, val_steps, epochs = job.size(
        (2048, 1024, 300, 40, 3), (64, 16, 20, 8, 2)
    )
    read_s = job.size(0.01, 0.005)
    model = jobkit.mlp(width, 4, width, 10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    inputs = torch.randn(batch, width, device=device)
    targets = torch.randint(0, 10, (batch,), device=device)
    val_host = [
        (torch.randn(batch, width), torch.randint(0, 10, (batch,))) for _ in range(val_steps)
    ]
    val_ready = [(x.to(device), y.to(device)) for x, y in val_host] if job.fixed else []
    for _epoch in range(epochs):
        with job.phase("train"):
            model.train()
            for _ in range(train_steps):
                optimizer.zero_grad(set_to_none=True)
                loss_fn(model(inputs), targets).backward()
                optimizer.step()
        with job.phase("validation"), torch.no_grad():
            model.eval()
            correct = torch.zeros((), device=device)
            if job.fixed:
                for x, y in val_ready:
                    correct += (model(x).argmax(dim=1) == y).sum()
                accuracy = float(correct) / (val_steps * batch)
            else:
                hits = 0
                for x, y in val_host:
                    jobkit.slow_io(read_s)
                    predictions = model(x.to(device)).cpu().tolist()
                    hits += sum(
                        int(max(range(10), key=row.__getitem__) == int(label))
                        for row, label in zip(predictions, y, strict=True)
                    )
                accuracy = hits / (val_steps * batch)
    job.facts.update(
        steps=train_steps * epochs,
        validation_steps=val_steps * epochs,
        samples=train_steps * epochs * batch,
        batch=batch,
        epochs=epochs,
        accuracy=round(accuracy, 4),
    )
    job.write()


if __name__ == "__main__":
    main()
