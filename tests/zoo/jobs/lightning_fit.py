"""A Lightning `LightningModule` trained with `Trainer.fit` and a validation loader, as the
Lightning docs' "Lightning in 15 minutes" does, then `Trainer.validate`. CPU, no logger, no
checkpoints, no progress bar. Prints the final validation loss.
"""

from __future__ import annotations

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

TRAIN, VALIDATE, BATCH = 256, 64, 32
WIDTH = 2048  # a step that costs far more than fetching its in-memory batch (and Lightning's
# bookkeeping around each fetch)


class Classifier(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(16, WIDTH),
            torch.nn.ReLU(),
            torch.nn.Linear(WIDTH, WIDTH),
            torch.nn.ReLU(),
            torch.nn.Linear(WIDTH, 2),
        )
        self.last_validation = float("nan")

    def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        self.last_validation = float(loss)
        return loss

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.SGD(self.parameters(), lr=0.1)


def data(count: int, seed: int) -> DataLoader:  # type: ignore[type-arg]
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, 16, generator=generator)
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=BATCH)


def main() -> None:
    L.seed_everything(0, verbose=False)
    model = Classifier()
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, data(TRAIN, 1), data(VALIDATE, 2))
    trainer.validate(model, data(VALIDATE, 2), verbose=False)
    print(f"final validation loss {model.last_validation:.6f}")


if __name__ == "__main__":
    main()
