"""The analysis on spans timed around a real PyTorch training loop (CPU), written through the real
RecordingWriter: the data wait it reports must match the input delay the loop really had."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpuwhy.analysis import diagnose
from gpuwhy.model import Span, SpanKind
from gpuwhy.recording import Recording, RecordingWriter

DELAY_S = 0.004  # per sample: slow reading
BATCH, BATCHES = 8, 30


@pytest.mark.slow
def test_wait_measured_around_a_real_dataloader_matches_its_delay(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return BATCH * BATCHES

        def __getitem__(self, index: int) -> tuple[object, int]:
            time.sleep(DELAY_S)
            return torch.randn(16), index % 3

    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    writer = RecordingWriter(tmp_path / "r.db")
    start = time.monotonic_ns()
    writer.set_meta("start_ns", start)
    slept_ns = 0
    loader = iter(DataLoader(Slow(), batch_size=BATCH, num_workers=0))
    for step in range(BATCHES):
        t0 = time.monotonic_ns()
        x, y = next(loader)
        t1 = time.monotonic_ns()
        slept_ns += t1 - t0
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        t2 = time.monotonic_ns()
        writer.put(Span("train", SpanKind.WAIT, t0, t1, step=step))
        writer.put(Span("train", SpanKind.STEP, t1, t2, step=step))
    end = time.monotonic_ns()
    writer.put(Span("train", SpanKind.PHASE, start, end))
    writer.set_meta("end_ns", end)
    writer.close()

    with Recording.open(tmp_path / "r.db") as recording:
        diagnosis = diagnose(recording)
    train = diagnosis.phases["train"]
    assert train.steps == BATCHES
    assert train.data_wait_s == pytest.approx(slept_ns / 1e9, rel=1e-6)
    # At least the delay itself: BATCH * DELAY_S per batch.
    assert train.data_wait_s >= BATCHES * BATCH * DELAY_S
    # Per-step figures are of the steady steps (a first step slowed by start-up is apart).
    assert train.steady_time_s is not None
    steady_wait = train.steady_data_wait_s
    assert train.data_wait_fraction == pytest.approx(steady_wait / train.steady_time_s, abs=1e-3)
    assert steady_wait >= (BATCHES - train.warmup_steps) * BATCH * DELAY_S
    top = diagnosis.findings[0]
    assert top.code == "INPUT_BOUND"
    assert top.speedup == pytest.approx((end - start) / (end - start - steady_wait * 1e9), rel=1e-2)
