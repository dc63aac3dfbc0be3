"""Hugging Face `Trainer` fine-tuning a sequence classifier, as the Transformers docs'
"Fine-tune a pretrained model" page does, with evaluation each epoch. No network: the model is
a small BERT initialised at random from a config (no weights are downloaded) and the data are
random token ids. Prints the final evaluation loss.

    --out DIR   the Trainer's output_dir (nothing is saved: save_strategy="no")
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

TRAIN, EVALUATE, LENGTH, BATCH = 96, 32, 32, 8


class Tokens(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __init__(self, count: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(5, 100, (count, LENGTH), generator=generator)
        self.labels = torch.randint(0, 2, (count,), generator=generator)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.ids[index],
            "attention_mask": torch.ones(LENGTH, dtype=torch.long),
            "labels": self.labels[index],
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("trainer-out"))
    args = parser.parse_args()
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=100,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=512,
        max_position_embeddings=LENGTH,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    training = TrainingArguments(
        output_dir=str(args.out),
        num_train_epochs=2,
        per_device_train_batch_size=BATCH,
        per_device_eval_batch_size=BATCH,
        eval_strategy="epoch",
        save_strategy="no",
        logging_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=training,
        train_dataset=Tokens(TRAIN, 1),
        eval_dataset=Tokens(EVALUATE, 2),
    )
    trainer.train()
    metrics = trainer.evaluate()
    print(f"final evaluation loss {metrics['eval_loss']:.6f}")


if __name__ == "__main__":
    main()
