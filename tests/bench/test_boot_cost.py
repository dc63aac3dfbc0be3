"""bench/boot_cost.py: a one-pair run on torch writes its row, every figure a number, and a
PyTorch job loads none of the Keras, TensorFlow or JAX hooks; bad arguments are one line and
exit 2. Nothing is asserted about the milliseconds: single pairs on a shared machine swing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT, assert_usage_error

SCRIPT = ROOT / "bench" / "boot_cost.py"


@pytest.mark.parametrize(
    "args", [["--pairs", "0"], ["--pairs", "x"], ["--frameworks", "mxnet"], ["--frobnicate"]]
)
def test_bad_arguments_are_one_line(args: list[str]) -> None:
    assert_usage_error(SCRIPT, args)


def test_one_pair_on_torch_writes_its_row_without_other_frameworks_hooks(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "boot.md"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--pairs", "1", "--frameworks", "torch", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    row = next(line for line in out.read_text().splitlines() if line.startswith("| torch |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == "1" and re.fullmatch(r"\d+\.\d{3}", cells[2])
    assert re.fullmatch(r"-?\d+\.\d", cells[3])
    assert re.fullmatch(r"-?\d+\.\d – -?\d+\.\d", cells[4])
    assert re.fullmatch(r"-?\d+\.\d", cells[5])
    hooks = set(cells[7].split(", "))
    assert {"auto", "emitter", "framework_hooks", "tracker"} <= hooks
    assert not hooks & {"keras_patches", "tfdata_wait", "tf_traces", "jax_steps", "try_fixes"}
