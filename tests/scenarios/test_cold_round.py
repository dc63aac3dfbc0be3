"""A tf.data `cache()` filled by the first epoch, under `gpuwhy run`, against the job's own clock:
that epoch is one-time work as a whole (steady.py's cold first round), and the figures a user
acts on — the wait share and INPUT_BOUND's `phase_speedup` — are those of the cached epochs.

Before the cold round was told apart, half of the filling epoch counted as steady steps: the
share read 0.67 and the phase speed-up 3.1x where the cached epochs' own clock said 0.25 and
1.3x."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT

pytest.importorskip("tensorflow")
pytestmark = [pytest.mark.slow, pytest.mark.timing]

JOB = Path(__file__).resolve().parent / "scripts" / "tf_tape_cached_map.py"
SHARE_TOLERANCE = 0.05  # bench/steady_truth.py's target
SPEEDUP_TOLERANCE = 0.15


def test_a_cache_filling_first_epoch_is_one_time_work(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "run", "--quiet", "--record", str(tmp_path / "r.db"),
         "--json", str(tmp_path / "r.json"), "--", sys.executable, str(JOB)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    own = json.loads(done.stdout.strip().splitlines()[-1])
    train = json.loads((tmp_path / "r.json").read_text())["phases"]["train"]
    walls, pulled = own["walls"], own["pulled"]
    share = sum(pulled[1:]) / sum(own["steady"][1:])  # the cached epochs, on the job's clock
    print(
        f"\nfirst epoch {walls[0]:.3f} s, gpuwhy's cold round {train['cold_round_s']:.3f} s; "
        f"cached epochs' share {share:.3f}, gpuwhy {train['data_wait_fraction']:.3f}"
    )
    assert train["cold_round_steps"] == own["steps"]
    assert train["steady_steps"] + train["warmup_steps"] == 3 * own["steps"]
    # The filling epoch as gpuwhy saw it: its steps, not the iterator's set-up before them.
    assert 0.8 * walls[0] <= train["cold_round_s"] <= walls[0]
    assert abs(train["data_wait_fraction"] - share) <= SHARE_TOLERANCE
    findings = json.loads((tmp_path / "r.json").read_text())["findings"]
    # Reading the cache still costs a quarter of a short step: the cached epochs' own speed-up,
    # not the filling epoch's.
    (bound,) = [f for f in findings if f["code"] == "INPUT_BOUND"]
    truth = 1 / (1 - share)
    assert abs(bound["evidence"]["phase_speedup"] / truth - 1) <= SPEEDUP_TOLERANCE
    (once,) = [f for f in findings if f["code"] == "ONE_TIME_WORK"]
    assert once["evidence"]["cold_round_steps"] == own["steps"]
