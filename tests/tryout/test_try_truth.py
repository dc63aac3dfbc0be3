"""`gpuwhy try` against the truth: its measured speed-up of a fix, against the same fix made by
hand in the job's code, each job timing itself (medians over rounds: each round one `gpuwhy
try`, then the job as written and as fixed by hand, alternated, in full runs).

The jobs (try_job.py) are real trainings whose input is slow in the stage `gpuwhy try` can
change: a PyTorch DataLoader, a tf.data map under a custom GradientTape loop, and under Keras
`fit`. The issue's bar: within 15 % of the truth's median. A compute-bound control must come
out as "nothing to gain", never as a win (test_try_jobs.py).

The custom loop is tried with two fixes in one `gpuwhy try`, as a user names them: a parallel
map, and (opt-in) a larger batch compared per sample. Its truth times the job as written once a
round for both: the same run gives the figure per batch and per sample.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support import module_at
from support.trying import TRY_JOB as JOB
from support.trying import gpuwhy_try

pytestmark = [pytest.mark.slow, pytest.mark.timing]

ROUNDS = 3
# Each try measures the whole job after its warm-up, as the job's own clock does (try_job.Clock).
_SIZES = module_at(JOB)  # (try_job.py imports a framework only when it trains)
SKIP, MEASURED = _SIZES.SKIP, _SIZES.MEASURED
TOLERANCE = 0.15
ESTIMATE_TOLERANCE = 0.15  # the estimate, made before any fix ran (tryout/estimates.py)
CLEARLY_BETTER = 1.15  # one fix's true speed-up over another's beyond the tolerance: a choice


@dataclass(frozen=True)
class HandFix:
    """A fix as `gpuwhy try` applies it (`--fix`, and the row it names) and as written by hand
    in the job (its flags), with the job's figure it is compared on."""

    fix: str
    name: str  # the row's name in `gpuwhy try --json`
    hand: tuple[str, ...]  # try_job.py's own flags for the fix
    figure: str = "per_batch_s"
    opt_in: tuple[str, ...] = ()
    estimated: bool = True  # gpuwhy estimates it before it runs (tryout/estimates.py)
    says: tuple[str, ...] = ()  # what its change must say besides the edited call


PARALLEL_MAP = HandFix("tf.parallel_map", "tf.parallel_map", ("--hand", "parallel_map"))
FIXES = {
    "torch": (
        HandFix(
            "torch.num_workers=4,torch.persistent_workers",
            "torch.num_workers=4, torch.persistent_workers",
            ("--hand", "num_workers=4", "--hand", "persistent_workers"),
        ),
    ),
    # A tf.data read that costs the same whatever the batch holds: twice the batch reads twice
    # the samples per wait; its truth is the job run with `--batch 128`, per sample.
    "tape": (
        PARALLEL_MAP,
        HandFix(
            "batch.scale=2",
            "batch.scale=2",
            ("--batch", "128"),
            figure="per_sample_s",
            opt_in=("--allow-batch-size",),
            estimated=False,
            says=("dataset.batch(128)", "scale the learning rate"),
        ),
    ),
    "keras": (PARALLEL_MAP,),
}


def _needs(loop: str) -> None:
    pytest.importorskip("torch" if loop == "torch" else "tensorflow")


def agrees(value: float, ratios: list[float], tolerance: float) -> bool:
    """Within ``tolerance`` of the truth's median. (The truth once spanned 1.9x to 2.6x for one
    fix; the spread was a stall at an epoch's start in the job as written, not the fix's effect:
    the job's clock now leaves each epoch's first batch out, as `gpuwhy try` does: try_job.py.)"""
    return abs(value / statistics.median(ratios) - 1) <= tolerance


def own_clock(loop: str, flags: tuple[str, ...], path: Path) -> dict[str, float]:
    """One full run of the job, plain (no gpuwhy), with the job's own `flags` for a fix: its own
    clock's figures, seconds per batch and per sample."""
    done = subprocess.run(
        [sys.executable, str(JOB), "--loop", loop, *flags, "--timing", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(path.read_text()))


def truth_round(
    loop: str, fixes: tuple[HandFix, ...], round_index: int, folder: Path
) -> dict[str, float]:
    """Per fix: as written / edited by hand, in one round that runs the job as written once and
    once per fix, in reverse order every other round."""
    variants: list[HandFix | None] = [None, *fixes]
    order = variants if round_index % 2 == 0 else variants[::-1]
    clocks = {
        None if fix is None else fix.name: own_clock(
            loop, () if fix is None else fix.hand, folder / f"t{round_index}-{position}.json"
        )
        for position, fix in enumerate(order)
    }
    return {fix.name: clocks[None][fix.figure] / clocks[fix.name][fix.figure] for fix in fixes}


def try_round(
    loop: str, fixes: tuple[HandFix, ...], folder: Path
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """One `gpuwhy try` of one round, as a user runs it: its output and its JSON report."""
    folder.mkdir()
    report_path = folder / "try.json"
    args = [arg for fix in fixes for arg in ("--fix", fix.fix)]
    args += sorted({flag for fix in fixes for flag in fix.opt_in})
    args += ["--rounds", "1", "--skip", str(SKIP), "--steps", str(MEASURED)]
    done = gpuwhy_try(
        [*args, "--json", str(report_path), "--", sys.executable, str(JOB), "--loop", loop],
        folder,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done, json.loads(report_path.read_text())


# The PyTorch fix runs four loader processes beside the training one: on two cores shared with
# another timing test its truth read 2.6-3.6x in one CI run where the estimate from the slow
# run said 4.74x (quiet: 4.32x against 4.58x, docs/try.md). It runs by itself, as the other
# jobs of several training processes do. So does the GradientTape loop's, whose two fixes (a
# map's calls on every core, a batch twice as large) beside another timing test failed both
# attempts in one full run of the suite (figures not kept), having passed in every one before.
ALONE = pytest.mark.alone


@pytest.mark.parametrize(
    "loop", [pytest.param("torch", marks=ALONE), pytest.param("tape", marks=ALONE), "keras"]
)
def test_measured_speedups_match_the_fixes_made_by_hand(loop: str, tmp_path: Path) -> None:
    """Each round is one `gpuwhy try --rounds 1`, then the truth's round right after it: a
    machine that grows busier or quieter (the tests beside this one) weighs on both alike. With
    `gpuwhy try --rounds 3` and then three rounds of the truth, the truth's rounds once read
    2.8x to 4.6x for one fix while the try before them read 4.65x."""
    _needs(loop)
    fixes = FIXES[loop]
    tries: dict[str, list[dict[str, Any]]] = {fix.name: [] for fix in fixes}
    truths: dict[str, list[float]] = {fix.name: [] for fix in fixes}
    bests, outputs = [], []
    for round_index in range(ROUNDS):
        done, report = try_round(loop, fixes, tmp_path / f"try{round_index}")
        rows = {row["name"]: row for row in report["fixes"]}
        assert set(rows) == {fix.name for fix in fixes}, list(rows)
        for fix in fixes:
            tries[fix.name].append(rows[fix.name])
        for name, ratio in truth_round(loop, fixes, round_index, tmp_path).items():
            truths[name].append(ratio)
        bests.append(report["best"])
        outputs.append(done.stdout)
    for fix in fixes:
        rows, ratios = tries[fix.name], truths[fix.name]
        measured = statistics.median(row["measured_speedup"] for row in rows)
        print(
            f"\n{loop}: {fix.fix}: gpuwhy try measured {measured:.2f}x "
            f"{[row['measured_speedup'] for row in rows]}, estimated "
            f"{[row['estimated_speedup'] for row in rows]}, truth "
            f"{statistics.median(ratios):.2f}x {ratios}"
        )
        assert all(row["verdict"] == "faster" for row in rows), rows
        assert agrees(measured, ratios, TOLERANCE), (fix.fix, measured, ratios)
        assert all(row["opt_in"] == list(fix.opt_in) for row in rows), rows
        if fix.estimated:
            estimate = statistics.median(row["estimated_speedup"] for row in rows)
            assert agrees(estimate, ratios, ESTIMATE_TOLERANCE), (fix.fix, estimate, ratios)
        for row in rows:
            changes = row["changes"]
            assert all(any(said in line for line in changes) for said in fix.says), changes
    # The one change to make: the truly best fix, where the truth tells them clearly apart (in
    # most rounds: one round's try may lean the other way where the two are close).
    by_truth = sorted(fixes, key=lambda fix: statistics.median(truths[fix.name]), reverse=True)
    best = statistics.median(truths[by_truth[0].name])
    clear = len(by_truth) == 1 or best > CLEARLY_BETTER * statistics.median(
        truths[by_truth[1].name]
    )
    if clear:
        assert bests.count(by_truth[0].name) > len(bests) / 2, (bests, truths)
    for chosen, stdout in zip(bests, outputs, strict=True):
        assert chosen in tries
        assert "the one change to make" in stdout and "try_job.py:" in stdout
        opt_in = next(fix.opt_in for fix in fixes if fix.name == chosen)
        if opt_in:  # chosen: the output says what it allows
            assert f"allowed by {opt_in[0]}" in stdout, stdout
