"""Parallel loading needs free cores: a real PyTorch loop whose batches cost CPU to decode, on
two cores, with `num_workers=0` and, as the fix, two workers, alternated.

Without workers the steps wait for most of their time, so the input made free (a batch that
costs nothing to decode, the third variant) makes them several times faster, as `phase_speedup`
says; but the job already keeps most of both cores busy, and two workers sharing them with the
step gain far less. INPUT_BOUND must say so: the most parallel loading can gain
(`parallel_speedup_at_most`, rules/input_pipeline.py), which the measured speed-up of the two
workers must not exceed, and a cheaper batch as the first fix.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support import ROOT

pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.timing]  # the truth is wall time, alternated

JOB = Path(__file__).resolve().parent / "scripts" / "torch_busy_cores.py"
CORES = 2
PAIRS = 2  # rounds of the three variants
TOLERANCE = 0.15  # the speed-up targets' (docs/data-wait.md)
# The wait share's: its target is 0.05, but this job's compute after each 10 ms CPU-bound read
# varies with how its intra-op threads slept through it (docs/data-wait.md, "Known shortfalls"):
# over the day's runs gpuwhy read 0.65-0.81 against truths of 0.76-0.82. 0.15 still fails an
# analysis that loses the wait (0.3 against 0.8).
SHARE_TOLERANCE = 0.15


def _on_two_cores() -> None:
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:CORES])


def _run(command: list[str], cwd: Path) -> str:
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=300, cwd=cwd,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src"), COLUMNS="200"),
        preexec_fn=_on_two_cores,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


VARIANTS = {"slow": ("0", "10"), "workers": ("2", "10"), "free": ("0", "0")}


def _step_s(variant: str, cwd: Path) -> float:
    workers, batch_ms = VARIANTS[variant]
    out = _run([sys.executable, str(JOB), "--workers", workers, "--batch-ms", batch_ms], cwd)
    return float(json.loads(out.strip().splitlines()[-1])["step_s"])


def _finding(tmp_path: Path) -> dict[str, Any]:
    report = tmp_path / "r.json"
    _run([sys.executable, "-m", "gpuwhy", "run", "--quiet", "--json", str(report), "--",
          sys.executable, str(JOB), "--workers", "0"], tmp_path)  # fmt: skip
    found = [f for f in json.loads(report.read_text())["findings"] if f["code"] == "INPUT_BOUND"]
    assert len(found) == 1, found
    return dict(found[0])


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < CORES,
    reason="needs two cores to pin the job to",
)
def test_input_bound_on_busy_cores_bounds_parallel_loading_and_puts_a_cheaper_batch_first(
    tmp_path: Path,
) -> None:
    finding = _finding(tmp_path)
    evidence = finding["evidence"]
    assert evidence["input"]["workers"] == 0
    assert evidence["cores"] == CORES
    # The loading thread burns a core while the step waits, and the step uses the cores too.
    assert evidence["job_cpu_cores"] >= 1.0
    ceiling = evidence["parallel_speedup_at_most"]
    assert ceiling == pytest.approx(CORES / evidence["job_cpu_cores"], rel=0.01)
    assert ceiling < evidence["phase_speedup"]
    fix = finding["fix"]
    assert fix.index("Make each batch cheaper") < fix.index("worker processes"), fix
    assert "parallel loading alone: at most" in finding["speedup_method"]

    steps: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    for pair in range(PAIRS):
        for variant in list(VARIANTS)[pair % 3 :] + list(VARIANTS)[: pair % 3]:
            steps[variant].append(_step_s(variant, tmp_path))
    slow, workers, free = (statistics.median(steps[variant]) for variant in VARIANTS)
    # What "the input made free" promises, a free batch buys (the wait share: one hooked run's
    # compute moves `phase_speedup` by a third either way at this share); the workers do not.
    assert evidence["data_wait_fraction"] == pytest.approx(1 - free / slow, abs=SHARE_TOLERANCE)
    assert slow / workers <= ceiling * (1 + TOLERANCE), (ceiling, steps)
