"""One stall against a slow pipeline, under `gpuwhy run`: the same 0.3 s of extra read time in
a real PyTorch loop, in one read partway through or spread over every read. Both make the loop
wait most of its time; only the wait that recurs is INPUT_BOUND (rules/input_bound.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuwhy.analysis.rules.input_bound import HIGH_FRACTION
from support import ROOT

pytest.importorskip("torch")
# Whether the other steps' waits stay under the moderate band depends on the machine having its
# cores for the job: these run with the timing tests.
pytestmark = [pytest.mark.slow, pytest.mark.timing]

JOB = Path(__file__).resolve().parent / "scripts" / "torch_one_stall.py"
EXTRA_S, STEPS = 0.3, 60  # the job's


def _gpuwhy(tmp_path: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", *args],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src"), COLUMNS="200"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _report(tmp_path: Path, extra: str) -> tuple[dict[str, Any], str, str]:
    """(the JSON report, the terminal report, the job's output) of the job under `gpuwhy run`."""
    record, report = tmp_path / "r.db", tmp_path / "r.json"
    output = _gpuwhy(tmp_path, "run", "--quiet", "--record", str(record), "--json", str(report),
                     "--", sys.executable, str(JOB), "--extra", extra)  # fmt: skip
    terminal = _gpuwhy(tmp_path, "report", str(record))
    return dict(json.loads(report.read_text())), terminal, output


@pytest.mark.parametrize("extra", ["stall", "spread"])
def test_only_a_wait_that_recurs_is_input_bound(tmp_path: Path, extra: str) -> None:
    report, terminal, _ = _report(tmp_path, extra)
    train = report["phases"]["train"]
    assert train["steps"] == STEPS
    # Either way the loop stood still for the extra time, most of its steady time.
    assert train["steady_data_wait_s"] >= EXTRA_S
    assert train["data_wait_fraction"] >= HIGH_FRACTION
    bound = [f for f in report["findings"] if f["code"] == "INPUT_BOUND"]
    stalled = "A stall, not a slow input" in terminal
    if extra == "stall":
        assert bound == [], bound
        assert train["steady_wait_longest_s"] >= EXTRA_S  # the stalled read, whole
        assert stalled and re.search(r"'train' waited [\d.]+ m?s in one step", terminal), terminal
    else:
        assert not stalled, terminal
        [finding] = bound
        # The longest step's wait is one batch's share of it, not a stall.
        assert finding["evidence"]["longest_step_wait_s"] < EXTRA_S / 4


def test_a_read_held_by_a_full_garbage_collection_says_so(tmp_path: Path) -> None:
    """One read partway through runs a full collection over a million live objects: a stall,
    and the report gives the collection's time inside the wait, as the job's own clock read it."""
    report, terminal, output = _report(tmp_path, "gc")
    collected_s = float(output.split("gc_s ")[1].split()[0])
    assert collected_s > 0.05, output  # long enough to stand out from a few ms of compute
    train = report["phases"]["train"]
    assert train["steps"] == STEPS
    assert train["steady_wait_longest_s"] >= collected_s
    # The hooks time the collection from its callbacks, inside the job's own clock around it
    # (the report rounds to 0.1 ms).
    gc_s = train["steady_wait_gc_s"]
    assert collected_s * 0.9 <= gc_s <= collected_s + 1e-4, (train, collected_s)
    assert [f for f in report["findings"] if f["code"] == "INPUT_BOUND"] == []
    assert re.search(r"full garbage collections held [\d.]+ m?s of its wait", terminal), terminal
