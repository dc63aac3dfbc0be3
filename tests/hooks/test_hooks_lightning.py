"""PyTorch Lightning (only where it is installed: it is not a dependency of the test envs)."""

from __future__ import annotations

import pytest
from hookspans import Collected

from gpuwhy.model import SpanKind

lightning = pytest.importorskip("lightning.pytorch")
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # every test trains with Lightning


class Tiny(lightning.LightningModule):  # type: ignore[misc, name-defined]
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch: object, batch_idx: int) -> object:
        x, y = batch  # type: ignore[misc]
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def validation_step(self, batch: object, batch_idx: int) -> None:
        x, y = batch  # type: ignore[misc]
        self.log("val", torch.nn.functional.mse_loss(self.layer(x), y))

    def configure_optimizers(self) -> object:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def loader() -> object:
    data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    return torch.utils.data.DataLoader(data, batch_size=4)


def test_trainer_gets_the_callback_and_emits_phases_and_steps(hooks: Collected) -> None:
    trainer = lightning.Trainer(
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(Tiny(), loader(), loader())
    assert len(hooks.spans(SpanKind.STEP, "train")) == 4
    assert len(hooks.spans(SpanKind.WAIT, "train")) == 4
    assert len(hooks.spans(SpanKind.STEP, "validation")) == 4
