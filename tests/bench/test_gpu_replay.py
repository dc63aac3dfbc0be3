"""bench/gpu_replay.py writes the GPU capture's table: one row per scenario with pairs, the lead
finding of today's analysis and the saving beside the jobs' own; a missing capture is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT

SCRIPT = ROOT / "bench" / "gpu_replay.py"
CAPTURE = ROOT / "tests" / "data" / "gpu" / "2026-11-26-nvidia-h200"


def replay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )


def test_the_table_has_every_scenario_with_its_lead_and_saving(tmp_path: Path) -> None:
    out = tmp_path / "gpu.md"
    done = replay("--capture", str(CAPTURE), "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = {
        line.split("|")[1].strip(" `"): [cell.strip() for cell in line.split("|")[2:-1]]
        for line in out.read_text().splitlines()
        if line.startswith("| `")
    }
    assert {"healthy", "torch_loader", "tiny_batch", "item_sync", "cpu_model"} <= set(rows)
    should, lead, pairs, estimate, truth, ratio, _fixed = rows["torch_loader"]
    assert should == lead == "INPUT_BOUND" and int(pairs) == 3
    assert 0.8 <= float(ratio) <= 1.2
    saved = float(estimate.removesuffix(" s")) / float(truth.removesuffix(" s"))
    assert saved == pytest.approx(float(ratio), abs=0.01)
    assert rows["healthy"][1] == "GPU_BOUND" and rows["cpu_model"][1] == "NOT_ON_GPU"
    assert "NVML | 10 Hz" in out.read_text()  # the sampler's cost on that machine


def test_a_missing_capture_is_one_line(tmp_path: Path) -> None:
    done = replay("--capture", str(tmp_path / "none"), "--out", str(tmp_path / "x.md"))
    assert done.returncode == 2 and "no capture folder" in done.stderr
    assert "Traceback" not in done.stderr


def test_by_default_every_committed_capture_has_its_section(tmp_path: Path) -> None:
    out = tmp_path / "gpu.md"
    done = replay("--out", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    captures = sorted(p.name for p in CAPTURE.parent.iterdir() if p.is_dir())
    assert len(captures) >= 2
    for name in captures:
        assert f"from `tests/data/gpu/{name}`" in text
    assert "| `torch_loader` |" in text and "| `keras_torch` |" in text
