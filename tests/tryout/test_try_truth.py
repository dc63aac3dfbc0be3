"""`gpuwhy try` against the truth: its measured speed-up of a fix, against the same fix made by
hand in the job's code, each job timing itself (medians of alternated full runs).

The jobs (try_job.py) are real trainings whose input is slow in the stage `gpuwhy try` can
change: a PyTorch DataLoader, a tf.data map under a custom GradientTape loop, and under Keras
`fit`. The issue's bar: within 15 % of the truth's median. A compute-bound control must come
out as "nothing to gain", never as a win (test_try_jobs.py).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from support.trying import TRY_JOB as JOB
from support.trying import gpuwhy_try

pytestmark = [pytest.mark.slow, pytest.mark.timing]

ROUNDS = 3
TOLERANCE = 0.15
ESTIMATE_TOLERANCE = 0.15  # the estimate, made before any fix ran (tryout/estimates.py)
HAND = {  # the same fix, as gpuwhy try applies it and as written by hand in the job
    "torch": (
        "torch.num_workers=4,torch.persistent_workers",
        ["num_workers=4", "persistent_workers"],
    ),
    "tape": ("tf.parallel_map", ["parallel_map"]),
    "keras": ("tf.parallel_map", ["parallel_map"]),
}


def _needs(loop: str) -> None:
    pytest.importorskip("torch" if loop == "torch" else "tensorflow")


def agrees(value: float, ratios: list[float], tolerance: float) -> bool:
    """Within ``tolerance`` of the truth's median. (The truth once spanned 1.9x to 2.6x for one
    fix; the spread was a stall at an epoch's start in the job as written, not the fix's effect:
    the job's clock now leaves each epoch's first batch out, as `gpuwhy try` does: try_job.py.)"""
    return abs(value / statistics.median(ratios) - 1) <= tolerance


def own_clock(loop: str, hand: list[str], path: Path, *, figure: str = "per_batch_s") -> float:
    """One full run of the job, plain (no gpuwhy): seconds per batch (or per sample) on its own
    clock. `hand`: the job's own flags for the fix (`--hand parallel_map`, `--batch 128`)."""
    args = [
        a for fix in hand for a in (fix.split(" ") if fix.startswith("--") else ("--hand", fix))
    ]
    done = subprocess.run(
        [sys.executable, str(JOB), "--loop", loop, *args, "--timing", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return float(json.loads(path.read_text())[figure])


def truth(
    loop: str, hand: list[str], tmp_path: Path, *, figure: str = "per_batch_s"
) -> list[float]:
    """Per round, as written / edited by hand; the order alternates from round to round."""
    ratios = []
    for round_index in range(ROUNDS):
        order = [False, True] if round_index % 2 == 0 else [True, False]
        times = {
            fixed: own_clock(
                loop,
                hand if fixed else [],
                tmp_path / f"t{round_index}{fixed}.json",
                figure=figure,
            )
            for fixed in order
        }
        ratios.append(times[False] / times[True])
    return ratios


@pytest.mark.parametrize("loop", ["torch", "tape", "keras"])
def test_measured_speedup_matches_the_fix_made_by_hand(loop: str, tmp_path: Path) -> None:
    _needs(loop)
    fix, hand = HAND[loop]
    report_path = tmp_path / "try.json"
    done = gpuwhy_try(
        [
            "--fix",
            fix,
            "--rounds",
            str(ROUNDS),
            "--skip",
            "5",
            "--steps",
            "30",
            "--json",
            str(report_path),
            "--",
            sys.executable,
            str(JOB),
            "--loop",
            loop,
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(report_path.read_text())
    (row,) = report["fixes"]
    ratios = truth(loop, hand, tmp_path)
    true_speedup = statistics.median(ratios)
    measured = row["measured_speedup"]
    print(
        f"\n{loop}: {fix}: gpuwhy try measured {measured:.2f}x {row['ratios']}, estimated "
        f"{row['estimated_speedup']}, truth {true_speedup:.2f}x {ratios}"
    )
    assert row["verdict"] == "faster" and report["best"] == row["name"]
    assert agrees(measured, ratios, TOLERANCE), (measured, ratios)
    estimate = row["estimated_speedup"]
    assert agrees(estimate, ratios, ESTIMATE_TOLERANCE), (estimate, ratios)
    assert "the one change to make" in done.stdout and "try_job.py:" in done.stdout


def test_a_larger_batch_is_compared_per_sample(tmp_path: Path) -> None:
    """Opt-in: a tf.data read that costs the same whatever the batch holds, so twice the batch
    reads twice the samples per wait; the truth is the job run with `--batch 128`, per sample."""
    pytest.importorskip("tensorflow")
    report_path = tmp_path / "try.json"
    args = ["--fix", "batch.scale=2", "--allow-batch-size", "--rounds", str(ROUNDS)]
    args += ["--skip", "5", "--steps", "30", "--json", str(report_path)]
    done = gpuwhy_try([*args, "--", sys.executable, str(JOB), "--loop", "tape"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json.loads(report_path.read_text())["fixes"]
    ratios = truth("tape", ["--batch 128"], tmp_path, figure="per_sample_s")
    true_speedup = statistics.median(ratios)
    print(f"\nbatch x2: gpuwhy try {row['measured_speedup']:.2f}x, truth {true_speedup:.2f}x")
    assert agrees(row["measured_speedup"], ratios, TOLERANCE), (row["measured_speedup"], ratios)
    assert row["opt_in"] == ["--allow-batch-size"]
    assert any("dataset.batch(128)" in line for line in row["changes"]), row["changes"]
    assert "scale the learning rate" in done.stdout or row["verdict"] != "faster"
