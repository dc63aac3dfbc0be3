"""bench/hook_ablation.py: a quick run on Keras's JAX backend times every variant, and each
switch takes out what it names (the records it no longer emits show it); bad arguments are
refused in one line with exit 2. Nothing is asserted about the costs: single rounds on a
shared machine swing by more than a hook costs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT, assert_usage_error

SCRIPT = ROOT / "bench" / "hook_ablation.py"
VARIANTS = (
    "bare",
    "every hook",
    "batch hooks off",
    "readiness check off",
    "pull timing off",
    "records off",
    "every per-step hook off",
    "device not asked",
)


@pytest.mark.slow
def test_a_quick_run_times_every_variant_and_each_switch_takes_its_part_out(
    tmp_path: Path,
) -> None:
    pytest.importorskip("jax")
    pytest.importorskip("keras")
    out = tmp_path / "ablation.md"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    written = out.read_text(encoding="utf-8")
    assert written.startswith("# ") and "Date: " in written and "Machine: " in written
    rows = {
        cells[0]: cells
        for line in written.splitlines()
        if line.startswith("| ") and not line.startswith("| variant")
        for cells in [[cell.strip() for cell in line.strip("|").split(" | ")]]
    }
    assert tuple(rows) == VARIANTS
    for name, cells in rows.items():
        wall, over_wall, cpu, over_cpu, _ = (float(cell) for cell in cells[2:])
        assert wall > 0 and cpu > 0, cells
        if name == "bare":
            assert over_wall == over_cpu == 0, cells
    records = {name: float(cells[-1]) for name, cells in rows.items()}
    # A step, a pull and a stamp a step with every hook; none where nothing is installed or
    # nothing is emitted; fewer without the batch hooks (the pulls then open one step a
    # phase) or without the pulls timed. The readiness check changes what a pull's record
    # says, not how many there are.
    assert records["every hook"] >= 3
    assert records["bare"] == records["records off"] == records["every per-step hook off"] == 0
    assert records["batch hooks off"] < records["every hook"] / 2
    assert records["pull timing off"] < records["every hook"]
    assert records["readiness check off"] == pytest.approx(records["every hook"], abs=0.1)
    assert records["device not asked"] == pytest.approx(records["every hook"], abs=0.1)


@pytest.mark.parametrize(
    "args",
    [
        ["--rounds", "0"],
        ["--rounds", "501"],
        ["--rounds", "many"],
        ["--backend", "tensorflow"],  # its pulls are timed in the graph, not by these hooks
        ["--out", str(ROOT)],  # a folder
        ["--no-such-flag"],
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args: list[str]) -> None:
    assert_usage_error(SCRIPT, args)
