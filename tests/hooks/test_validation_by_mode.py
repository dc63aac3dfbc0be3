"""End to end: a PyTorch job with no DataLoader, validating over a list between `model.eval()`
and `model.train()` each epoch, under `gpuwhy run`: its validation is a phase of its own and,
slow, is SLOW_VALIDATION (the H200 capture's slow_validation scenario, on the CPU)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from hooks.test_hooks_sync_path import gpuwhy_run

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

JOB = textwrap.dedent(
    """
    import time
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    x, y = torch.randn(64, 32), torch.randn(64, 1)
    batches = [(x[i : i + 8], y[i : i + 8]) for i in range(0, 64, 8)]
    for epoch in range(4):
        net.train()
        for _ in range(5):
            for bx, by in batches:
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(net(bx), by).backward()
                optimizer.step()
        net.eval()
        with torch.no_grad():
            for bx, by in batches:
                time.sleep(0.03)  # a slow host-side metric, batch by batch
                float(torch.nn.functional.mse_loss(net(bx), by))
    """
)


def test_a_slow_list_validation_is_its_own_phase_and_slow_validation(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(JOB)
    gpuwhy_run(tmp_path, sys.executable, str(script))
    report = json.loads((tmp_path / "job.json").read_text())
    phases = report["phases"]
    # All four evaluations are named: the last, with no `.train()` after it, ends with its
    # last forward, not with the job's teardown.
    assert phases["validation"]["rounds"] == 4
    assert phases["validation"]["time_s"] >= 4 * 8 * 0.03
    assert phases["train"]["steps"] == 4 * 39  # 40 optimizer steps bound 39 steps an epoch
    slow = next(f for f in report["findings"] if f["code"] == "SLOW_VALIDATION")
    evidence = slow["evidence"]
    assert evidence["validation_rounds"] == 4 and evidence["validation_share_of_loop"] > 0.2
    # Each round: eight batches of 30 ms, and nothing of the training's steps.
    assert all(0.24 <= s < 0.24 + 0.2 for s in evidence["validation_round_s"])
