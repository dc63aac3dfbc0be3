"""Real data-parallel jobs under `gpuwhy run`: `torchrun` starting DistributedDataParallel ranks
over `gloo` on this machine's CPU (ddp_job.py), one rank's input slowed on purpose.

Truth is measured, never assumed: each job reports its own steady seconds per step, rank by
rank. The straggler job, the balanced one (the same job with the slow rank's input as quick as
the others') and the one with no input delay run alternated, three times each (a median that one
stalled run cannot move: on this shared machine the ranks' all-reduce alone took 2 to 6 ms a
step from one run to the next); the straggler's
speed-up is the ratio of the first two's median steps, and gpuwhy's STRAGGLER estimate must be
within 15 % of it. INPUT_BOUND's estimate on both is held to the job with no input delay at all,
within the scenario suite's 25 %
(tests/scenarios). The steps' 36 ms of device time (a pause) is most of a step with no input, so
the all-reduce's jitter stays a small part of that truth.
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
from support.truth import assert_runs_at_most

HERE = Path(__file__).resolve().parent
JOB = HERE / "ddp_job.py"
RANKS = 2
SLOW_RANK = 1
STEPS = 40
ROUNDS = 3
COMPUTE_MS = 36  # a step's device time (a pause in ddp_job.py)
SLOW_READ_MS = 64  # the slow rank's reads a batch, against the others' 8
pytestmark = [pytest.mark.slow, pytest.mark.timing, pytest.mark.alone]


def _run(tmp: Path, name: str, *job_args: str) -> dict[str, Any]:
    out = tmp / name
    command = [
        sys.executable, "-m", "gpuwhy", "run", "--json", str(tmp / f"{name}.json"),
        "--record", str(tmp / f"{name}.gpuwhy.db"), "--",
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc-per-node={RANKS}", str(JOB), "--steps", str(STEPS), "--out", str(out),
        "--compute-ms", str(COMPUTE_MS), "--slow-read-ms", str(SLOW_READ_MS), *job_args,
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
    for round_ in range(ROUNDS):  # alternated: a noisy minute slows every variant alike
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


MWMS_READ_MS = "80"  # the slow worker's read: about four times its step (compute, collectives)
MWMS_FREE_STEPS = "12-19,32-39"  # the slow worker's reads made free: the truth, in the same run
# Each step's compute, timed on the machine: as many layers as take it (2 took 9-40 ms a step
# from one machine to another, where the scenario was made with ~17).
MWMS_COMPUTE_MS = "17"


def _watched_reading(tmp_path: Path) -> tuple[float, float, float]:
    """One run under gpuwhy: its ranks, steps and straggler checked; (share, phase_speedup,
    the run's true speed-up: its steady steps' time over that of as many free steps)."""
    report = _mwms_report(
        tmp_path, "--read-ms", MWMS_READ_MS, "--free-steps", MWMS_FREE_STEPS,
        "--compute-ms", MWMS_COMPUTE_MS,
    )  # fmt: skip
    rows = report["ranks"]["train"]
    assert [(row["rank"], row["launcher"], row["world_size"]) for row in rows] == [
        (0, "tf_config", 2),
        (1, "tf_config", 2),
    ]
    truths = []
    for row in rows:
        own = json.loads((tmp_path / "out" / f"worker{row['rank']}.json").read_text())
        assert row["steps"] == own["steps"] == 40
        truths.append(own["steady_s_per_step"] / own["free_s_per_step"])
    assert report["phases"]["train"]["steps"] == 40
    assert any(f["code"] == "INPUT_BOUND" for f in report["findings"])
    (straggler,) = [f["evidence"] for f in report["findings"] if f["code"] == "STRAGGLER"]
    assert straggler["rank"] == 1 and straggler["cause"] == "input", straggler
    share = report["phases"]["train"]["data_wait_fraction"]
    return share, straggler["phase_speedup"], statistics.mean(truths)


def test_tensorflow_multi_worker_ranks_come_from_tf_config(tmp_path: Path) -> None:
    """Two MultiWorkerMirroredStrategy workers (TF_CONFIG), a custom loop over a distributed
    dataset: each worker is a rank with its own steps. Worker 1's input is slow. Each pull also
    agrees across the workers on whether data remains, so worker 0 waits for worker 1 there;
    each worker's wait is its own worker's pulls, so worker 1 is the one named.

    Against the fix, taken inside each watched run: worker 1 reads 16 of its 40 batches free
    (`--free-steps`), and each worker clocks its steady steps and, apart, its free ones; were
    every read free, every steady step would take a free one's time. Truths from separate bare
    runs did not hold still: the job with no slow input, its compute and collectives, took
    17.2-22.4 ms a step from one run to the next (each worker on a core of its own, 2026-11-29),
    within a run steady.

    gpuwhy's share of the phase and its STRAGGLER `phase_speedup` are lower bounds of that
    truth: a worker that arrived late to the collectives ran its agreement and step 1.5-2 ms
    slower than in the balanced job (measured bare, its own clock around each part), which the
    fix also removes and no wait shows. Over ~17 ms of compute a step they read within 0.02 of
    the truth (2026-11-29); over the collectives alone (~5 ms) 0.59-0.68 where the truth was
    0.73-0.76, and on a faster 2-core machine, whose two layers took ~9 ms, 0.69-0.71 against
    0.76-0.78; the compute is now timed to ~17 ms on each machine. Each
    run's against that run's truth, medians of three runs, must not read above it by more than
    the data-wait family's 0.05 and 15 %."""
    readings = [_watched_reading(tmp_path / f"watched{run}") for run in range(3)]
    assert_runs_at_most(*zip(*readings, strict=True))


def test_tensorflow_multi_worker_agreement_on_the_data_is_no_input_wait(tmp_path: Path) -> None:
    """The same job over in-memory input: each pull's agreement across the workers (a collective,
    most of a CPU step with no compute of its own) is not waiting for input. Timed whole, the
    pulls read 0.72 of each step as waiting and said INPUT_BOUND."""
    report = _mwms_report(tmp_path, "--slow-worker", "-1", "--work", "0")
    assert report["phases"]["train"]["data_wait_fraction"] < 0.2, report["phases"]["train"]
    assert not [f for f in report["findings"] if f["code"] in ("INPUT_BOUND", "STRAGGLER")]
