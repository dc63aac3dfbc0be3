"""Parallel loading needs free cores: a real PyTorch loop whose batches cost CPU to decode, on
two cores, with `num_workers=0` and, as the fix, two workers, alternated.

Without workers the steps wait for most of their time, as gpuwhy reads against the loop's own
clock of its pulls in the same run; but the job already keeps most of both cores busy, and two
workers sharing them with the step gain far less. INPUT_BOUND must say so: the most parallel
loading can gain (`parallel_speedup_at_most`, rules/input_pipeline.py), which the measured
speed-up of the two workers must not exceed, and a cheaper batch as the first fix.

The share is held to the loop's own clock, not to the job with a free batch: the compute after
each CPU-bound read varies with how the intra-op threads slept through it (docs/data-wait.md,
"Known shortfalls"), by 2.4-5.5 ms a step over one day's runs, and more on a loaded machine
(gpuwhy 0.51-0.57 against a free batch's 0.74-0.76), a cost no stamp of the input sees; the
input made free is held to its truth in tests/scenarios/test_steady_truth.py.
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
pytestmark = [pytest.mark.slow, pytest.mark.timing, pytest.mark.alone]  # wall time, alternated

JOB = Path(__file__).resolve().parent / "scripts" / "torch_busy_cores.py"
CORES = 2
PAIRS = 2  # rounds of the two variants
TOLERANCE = 0.15  # the speed-up targets' (docs/data-wait.md)
SHARE_TOLERANCE = 0.05  # bench/steady_truth.py's target


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


VARIANTS = ("0", "2")  # workers: as written, and the fix


def _own(out: str) -> dict[str, Any]:
    """The job's own figures: its last line."""
    return dict(json.loads(out.strip().splitlines()[-1]))


def _step_s(workers: str, cwd: Path) -> float:
    return float(_own(_run([sys.executable, str(JOB), "--workers", workers], cwd))["step_s"])


def _finding(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """INPUT_BOUND of the job run under gpuwhy, and the job's own figures in that run."""
    report = tmp_path / "r.json"
    out = _run([sys.executable, "-m", "gpuwhy", "run", "--quiet", "--json", str(report), "--",
                sys.executable, str(JOB), "--workers", "0"], tmp_path)  # fmt: skip
    found = [f for f in json.loads(report.read_text())["findings"] if f["code"] == "INPUT_BOUND"]
    assert len(found) == 1, found
    return dict(found[0]), _own(out)


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < CORES,
    reason="needs two cores to pin the job to",
)
def test_input_bound_on_busy_cores_bounds_parallel_loading_and_puts_a_cheaper_batch_first(
    tmp_path: Path,
) -> None:
    finding, own = _finding(tmp_path)
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
    # gpuwhy's steady steps are the later epochs' and those of the first epoch that were not
    # warm-up, so its share lies between the two on the job's own clock (each epoch from its
    # second pull). Mostly they agree (five runs: all three epochs within 0.005 of gpuwhy), but
    # the first epoch sometimes ran much slower (3.2 s against 1.76 s): then gpuwhy read 0.69
    # where all three read 0.61, and in another run lower than the later epochs' 0.73.
    waited, steady = own["waited"], own["steady"]
    shares = (waited[0] / steady[0], sum(waited[1:]) / sum(steady[1:]))
    share = evidence["data_wait_fraction"]
    print(f"\nwait share: gpuwhy {share:.3f}, own clock (first epoch, later ones) {shares}")
    assert min(shares) - SHARE_TOLERANCE <= share <= max(shares) + SHARE_TOLERANCE, own

    steps: dict[str, list[float]] = {workers: [] for workers in VARIANTS}
    for pair in range(PAIRS):
        for workers in VARIANTS[pair % 2 :] + VARIANTS[: pair % 2]:
            steps[workers].append(_step_s(workers, tmp_path))
    slow, parallel = (statistics.median(steps[workers]) for workers in VARIANTS)
    assert slow / parallel <= ceiling * (1 + TOLERANCE), (ceiling, steps)
