"""One stall against a slow pipeline, under `gpuwhy run`: the same 0.3 s of extra read time in
a real PyTorch loop, in one read partway through or spread over every read. Both make the loop
wait most of its time; only the wait that recurs is INPUT_BOUND (rules/input_bound.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuwhy.analysis.rules.input_bound import HIGH_FRACTION
from support import ROOT

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

JOB = Path(__file__).resolve().parent / "scripts" / "torch_one_stall.py"
EXTRA_S, STEPS = 0.3, 60  # the job's


def _report(tmp_path: Path, extra: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "run", "--quiet", "--json", str(tmp_path / "r.json"),
         "--", sys.executable, str(JOB), "--extra", extra],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads((tmp_path / "r.json").read_text()))


@pytest.mark.parametrize("extra", ["stall", "spread"])
def test_only_a_wait_that_recurs_is_input_bound(tmp_path: Path, extra: str) -> None:
    report = _report(tmp_path, extra)
    train = report["phases"]["train"]
    assert train["steps"] == STEPS
    # Either way the loop stood still for the extra time, most of its steady time.
    assert train["steady_data_wait_s"] >= EXTRA_S
    assert train["data_wait_fraction"] >= HIGH_FRACTION
    bound = [f for f in report["findings"] if f["code"] == "INPUT_BOUND"]
    if extra == "stall":
        assert bound == [], bound
    else:
        [finding] = bound
        # The longest step's wait is one batch's share of it, not a stall.
        assert finding["evidence"]["longest_step_wait_s"] < EXTRA_S / 4
