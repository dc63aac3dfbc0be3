"""Real data-parallel jobs under `gpuwhy run`: `torchrun` starting DistributedDataParallel ranks
over `gloo` on this machine's CPU (ddp_job.py), one rank's input slowed on purpose.

Truth is measured, never assumed: each job reports its own steady seconds per step, rank by
rank. The straggler job, the balanced one (the same job with the slow rank's input as quick as
the others') and the one with no input delay run alternated, twice each; the straggler's
speed-up is the ratio of the first two's median steps, and gpuwhy's STRAGGLER estimate must be
within 15 % of it. INPUT_BOUND's estimate on both is held to the job with no input delay at all,
within the scenario suite's 25 %
(tests/scenarios). It reads high here by design of the test bed, not of the estimate: with no
input to wait for, both ranks and the launcher compute at once on this machine's two cores, each
step ~2.5 ms slower than one rank alone (a GPU node gives each rank its own device and cores);
the job's 12 ms of device time per step keeps that within the tolerance.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gpuwhy.report import json_report

HERE = Path(__file__).resolve().parent
JOB = HERE / "ddp_job.py"
RANKS = 2
SLOW_RANK = 1
STEPS = 40
pytestmark = [pytest.mark.slow, pytest.mark.timing]


def _run(tmp: Path, name: str, *job_args: str) -> dict[str, Any]:
    out = tmp / name
    command = [
        sys.executable, "-m", "gpuwhy", "run", "--json", str(tmp / f"{name}.json"),
        "--record", str(tmp / f"{name}.gpuwhy.db"), "--",
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc-per-node={RANKS}", str(JOB), "--steps", str(STEPS), "--out", str(out),
        *job_args,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    report = json.loads((tmp / f"{name}.json").read_text())
    ranks = {
        data["rank"]: data
        for data in (json.loads(path.read_text()) for path in sorted(out.glob("rank*.json")))
    }
    assert sorted(ranks) == list(range(RANKS)), done.stderr[-3000:]
    return {"report": report, "ranks": ranks, "shown": done.stderr}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("ddp")
    found: dict[str, list[dict[str, Any]]] = {"straggler": [], "balanced": [], "no_input": []}
    for round_ in range(2):  # alternated: a noisy minute slows every variant alike
        found["straggler"].append(_run(tmp, f"s{round_}", "--slow-rank", str(SLOW_RANK)))
        found["balanced"].append(_run(tmp, f"b{round_}"))
        found["no_input"].append(_run(tmp, f"n{round_}", "--read-ms", "0"))
    return found


def _step_s(runs: list[dict[str, Any]]) -> float:
    """The job's own measure: the median over runs of its ranks' steady seconds per step."""
    return statistics.median(
        statistics.median(rank["steady_step_s"] for rank in run["ranks"].values()) for run in runs
    )


def _finding(run: dict[str, Any], code: str) -> dict[str, Any] | None:
    return next((f for f in run["report"]["findings"] if f["code"] == code), None)


def test_every_rank_is_its_own_row_with_the_steps_it_ran(
    runs: dict[str, list[dict[str, Any]]],
) -> None:
    for run in (r for variant in runs.values() for r in variant):
        jsonschema.validate(run["report"], json_report.schema())
        rows = run["report"]["ranks"]["train"]
        assert [row["label"] for row in rows] == [f"rank {r}" for r in range(RANKS)]
        for row in rows:
            job = run["ranks"][row["rank"]]
            assert row["pid"] == job["pid"]  # the rank the launcher gave, joined to its process
            assert row["steps"] == job["steps"] == STEPS
            assert row["launcher"] == "torchrun" and row["world_size"] == RANKS
        assert run["report"]["phases"]["train"]["steps"] == STEPS  # one rank's, not the sum
    shown = runs["straggler"][0]["shown"]
    assert f"Per rank in 'train' ({RANKS} ranks)" in shown
    assert all(f"rank {r}" in shown for r in range(RANKS))


def test_the_slow_ranks_input_is_named_and_its_cost_measured(
    runs: dict[str, list[dict[str, Any]]],
) -> None:
    truth = _step_s(runs["straggler"]) / _step_s(runs["balanced"])
    assert truth > 1.5, f"the job's slow rank did not slow it: {truth:.2f}x"
    estimates = []
    for run in runs["straggler"]:
        finding = _finding(run, "STRAGGLER")
        assert finding is not None, run["report"]["findings"]
        evidence = finding["evidence"]
        assert evidence["rank"] == SLOW_RANK and evidence["cause"] == "input"
        assert evidence["pid"] == run["ranks"][SLOW_RANK]["pid"]
        assert f"rank {SLOW_RANK}" in finding["title"]
        estimates.append(evidence["phase_speedup"])
    estimate = statistics.median(estimates)
    assert estimate == pytest.approx(truth, rel=0.15), (estimates, truth)


def test_balanced_ranks_have_no_straggler(runs: dict[str, list[dict[str, Any]]]) -> None:
    for run in runs["balanced"] + runs["no_input"]:
        assert _finding(run, "STRAGGLER") is None, run["report"]["findings"]


def test_the_input_bound_estimate_holds_for_the_slowest_rank(
    runs: dict[str, list[dict[str, Any]]],
) -> None:
    """Ranks in lockstep wait as long as their slowest input: removing every rank's input wait
    speeds the job up by the slowest rank's wait, not by the ranks' average."""
    instant = _step_s(runs["no_input"])
    for variant in ("straggler", "balanced"):
        truth = _step_s(runs[variant]) / instant
        estimates = []
        for run in runs[variant]:
            finding = _finding(run, "INPUT_BOUND")
            assert finding is not None, run["report"]["findings"]
            estimates.append(finding["evidence"]["phase_speedup"])
        assert statistics.median(estimates) == pytest.approx(truth, rel=0.25), (variant, truth)


MWMS_JOB = HERE / "mwms_job.py"


def _mwms_report(tmp_path: Path, *args: str) -> dict[str, Any]:
    tmp_path.mkdir(exist_ok=True)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "run", "--json", str(tmp_path / "r.json"),
         "--record", str(tmp_path / "r.gpuwhy.db"), "--",
         sys.executable, str(MWMS_JOB), "--steps", "40", "--out", str(out), *args],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads((tmp_path / "r.json").read_text()))


MWMS_READ_MS = "80"  # the slow worker's read: twice its step (~20 ms of compute and collectives)


def _steady_s(tmp_path: Path, slow_worker: int) -> float:
    """The workers' own clock of their steady steps, bare (their median), s per step."""
    out = tmp_path / f"bare{len(list(tmp_path.glob('bare*')))}"
    subprocess.run(
        [sys.executable, str(MWMS_JOB), "--steps", "40", "--out", str(out),
         "--slow-worker", str(slow_worker), "--read-ms", MWMS_READ_MS],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    marks = [json.loads(path.read_text()) for path in sorted(out.glob("worker*.json"))]
    return statistics.median(mark["steady_s_per_step"] for mark in marks)


def _watched_reading(tmp_path: Path) -> tuple[float, float]:
    """One run under gpuwhy: its ranks, steps and straggler checked; (share, phase_speedup)."""
    report = _mwms_report(tmp_path, "--read-ms", MWMS_READ_MS)
    rows = report["ranks"]["train"]
    assert [(row["rank"], row["launcher"], row["world_size"]) for row in rows] == [
        (0, "tf_config", 2),
        (1, "tf_config", 2),
    ]
    for row in rows:
        own = json.loads((tmp_path / "out" / f"worker{row['rank']}.json").read_text())
        assert row["steps"] == own["steps"] == 40
    assert report["phases"]["train"]["steps"] == 40
    assert any(f["code"] == "INPUT_BOUND" for f in report["findings"])
    (straggler,) = [f["evidence"] for f in report["findings"] if f["code"] == "STRAGGLER"]
    assert straggler["rank"] == 1 and straggler["cause"] == "input", straggler
    return report["phases"]["train"]["data_wait_fraction"], straggler["phase_speedup"]


def test_tensorflow_multi_worker_ranks_come_from_tf_config(tmp_path: Path) -> None:
    """Two MultiWorkerMirroredStrategy workers (TF_CONFIG), a custom loop over a distributed
    dataset: each worker is a rank with its own steps. Worker 1's input is slow. Each pull also
    agrees across the workers on whether data remains, so worker 0 waits for worker 1 there;
    each worker's wait is its own worker's pulls, so worker 1 is the one named.

    Against the fix: worker 1 slow and no worker slow, bare, each worker's own clock of its
    steady steps; gpuwhy's share of the phase and its STRAGGLER `phase_speedup`, medians of
    three watched runs, are held to the data-wait family's 0.05 and 15 %. The slow job's step is
    its read, steady to 1 % from run to run; the step with no slow input, its compute and
    collectives, took 17.2-22.4 ms (each worker on a core of its own, 2026-11-29), within a run
    steady: so three runs of that job and two of the slow one, the three kinds in turn. With a
    read of 40 ms, twice as sensitive to that spread, the share of single runs missed the truth
    by up to 0.09 either way.

    Each step computes ~17 ms besides its two collectives: over steps of the collectives alone
    (~5 ms), a worker that arrived late to them ran its agreement and step 1.5-2 ms slower than
    in the balanced job (measured bare, its own clock around each part), which the fix also
    removes and no wait shows; there gpuwhy read 0.59-0.68 where the truth was 0.73-0.76."""
    slow: list[float] = []
    fast: list[float] = []
    readings: list[tuple[float, float]] = []
    for kinds in ((1, -1), (-1, 1), (-1,)):  # -1: no worker slow
        for slow_worker in kinds:
            (slow if slow_worker == 1 else fast).append(_steady_s(tmp_path, slow_worker))
        readings.append(_watched_reading(tmp_path / f"watched{len(readings)}"))
    share_truth = 1 - statistics.median(fast) / statistics.median(slow)
    speedup_truth = statistics.median(slow) / statistics.median(fast)
    share = statistics.median(share for share, _ in readings)
    speedup = statistics.median(speedup for _, speedup in readings)
    print(
        f"\nshare truth {share_truth:.3f} gpuwhy {share:.3f}; speed-up truth "
        f"{speedup_truth:.2f} gpuwhy {speedup:.2f}; runs {readings}; bare slow {slow} fast {fast}"
    )
    assert abs(share - share_truth) <= 0.05, (share, share_truth)
    assert speedup == pytest.approx(speedup_truth, rel=0.15)


def test_tensorflow_multi_worker_agreement_on_the_data_is_no_input_wait(tmp_path: Path) -> None:
    """The same job over in-memory input: each pull's agreement across the workers (a collective,
    most of a CPU step with no compute of its own) is not waiting for input. Timed whole, the
    pulls read 0.72 of each step as waiting and said INPUT_BOUND."""
    report = _mwms_report(tmp_path, "--slow-worker", "-1", "--work", "0")
    assert report["phases"]["train"]["data_wait_fraction"] < 0.2, report["phases"]["train"]
    assert not [f for f in report["findings"] if f["code"] in ("INPUT_BOUND", "STRAGGLER")]
