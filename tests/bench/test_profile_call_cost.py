"""bench/profile_call_cost.py: a short run writes a row per loop, every figure a positive number
(the in-step cost of a call, its calibration, their factor). Nothing is asserted about the
factor itself: a few blocks on a shared machine swing by more; the bench's full runs are what
`legacy_generator.IN_STEP_FACTOR` rests on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT

SCRIPT = ROOT / "bench" / "profile_call_cost.py"
PY310 = ROOT / ".venvs" / "py310-jax" / "bin" / "python"


@pytest.mark.slow
def test_a_short_run_measures_a_call_in_each_loop(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "profile_call_cost.md"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--blocks", "4", "--repeat", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    written = out.read_text(encoding="utf-8")
    assert "- Date: " in written and "- Machine: " in written
    loop_rows = [line for line in written.splitlines() if line.startswith(("| torch", "| jax"))]
    rows = [line.strip("| ").split(" | ") for line in loop_rows]
    loops = [row[0] for row in rows]
    assert loops == (["torch", "jax"] if PY310.exists() else ["torch"]), written
    for row in rows:
        calls, without, with_it, _in_step, calibrated, _factor = map(float, row[2:])
        assert calls > 10 and without > 0 and with_it > 0 and calibrated > 0, row
