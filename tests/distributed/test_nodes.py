"""A job of two "nodes" on this machine: two `gpuwhy run --record DIR/` processes, each running
`torchrun --nnodes 2 --node-rank K` with one rank (ddp_job.py, DDP over `gloo`, rendezvous on
127.0.0.1), rank 1's input slowed; then `gpuwhy report DIR/` merges the two recordings.

Both "nodes" share this machine's clock, so the truth of their alignment is known: no offset at
all. A copy of one node's recording whose start wall time is moved by 250 ms (as a node whose
clock is off) must be put back by the step ends, to within the residual the report states.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gpuwhy.cli import main
from gpuwhy.errors import ExitCode
from gpuwhy.report import json_report
from support import free_port

JOB = Path(__file__).resolve().parent / "ddp_job.py"
STEPS = 60
SKEW_S = 0.25
# Its two nodes' step ends agree within 10 ms on a quiet machine; beside the other tests' jobs
# one run read 13.8 ms (2026-11-30): the alignment is measured alone.
pytestmark = [pytest.mark.slow, pytest.mark.timing, pytest.mark.alone]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder holding the two nodes' recordings (and the ranks' own figures in out/)."""
    tmp = tmp_path_factory.mktemp("nodes")
    records = tmp / "records"
    records.mkdir()
    port = free_port()
    nodes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpuwhy",
                "run",
                "--quiet",
                "--record",
                f"{records}/",
                "--",
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes=2",
                f"--node-rank={k}",
                "--nproc-per-node=1",
                "--master-addr=127.0.0.1",
                f"--master-port={port}",
                str(JOB),
                "--steps",
                str(STEPS),
                "--slow-rank",
                "1",
                "--out",
                str(tmp / "out"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for k in (0, 1)
    ]
    for node in nodes:
        output, _ = node.communicate(timeout=300)
        assert node.returncode == 0, output[-3000:]
    return tmp


def _report(*paths: Path | str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "report", *map(str, paths), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    jsonschema.validate(report, json_report.schema())
    return report


def test_each_node_records_apart_and_the_job_reads_as_one(job: Path) -> None:
    recordings = sorted((job / "records").glob("*.gpuwhy.db"))
    assert len(recordings) == 2  # one name per node, derived, in the shared folder
    report = _report(job / "records")
    ranks = {row["rank"]: row for row in report["ranks"]["train"]}
    assert sorted(ranks) == [0, 1]
    for rank, row in ranks.items():
        own = json.loads((job / "out" / f"rank{rank}.json").read_text())
        assert row["steps"] == own["steps"] == STEPS and row["pid"] == own["pid"]
        assert row["world_size"] == 2 and row["node"] == rank  # torchrun's GROUP_RANK
    (straggler,) = [f for f in report["findings"] if f["code"] == "STRAGGLER"]
    assert straggler["evidence"]["rank"] == 1
    # One clock: the wall clocks agree exactly, and the step ends say so within a few ms.
    first, second = report["nodes"]
    assert first["offset_s"] == 0 and first["common_steps"] == STEPS
    assert second["common_steps"] == STEPS
    assert abs(second["wall_offset_s"]) < 0.001
    assert abs(second["correction_s"]) < 0.005 and second["residual_s"] < 0.010
    # The same report from the files named one by one.
    assert _report(*sorted(recordings))["nodes"] == report["nodes"]


def test_a_node_whose_clock_is_off_is_put_back_by_the_step_ends(job: Path, tmp_path: Path) -> None:
    original = sorted((job / "records").glob("*.gpuwhy.db"))
    skewed = tmp_path / "skewed"
    skewed.mkdir()
    for path in original:
        shutil.copy(path, skewed / path.name)
    # This node's wall clock reads 250 ms ahead: by the wall clocks alone, its times would be
    # put 250 ms late.
    with sqlite3.connect(skewed / original[1].name) as db:
        (wall,) = db.execute("SELECT value FROM meta WHERE key = 'start_wall_s'").fetchone()
        db.execute(
            "UPDATE meta SET value = ? WHERE key = 'start_wall_s'",
            (json.dumps(json.loads(wall) + SKEW_S),),
        )
    db.close()
    truth = _report(job / "records")["nodes"][1]
    found = _report(skewed)["nodes"][1]
    assert found["wall_offset_s"] == pytest.approx(truth["wall_offset_s"] + SKEW_S, abs=1e-6)
    assert found["correction_s"] == pytest.approx(truth["correction_s"] + SKEW_S, abs=0.005)
    assert found["offset_s"] == pytest.approx(truth["offset_s"], abs=found["residual_s"] + 0.001)
    ranks = _report(skewed)["ranks"]["train"]
    assert [row["steps"] for row in ranks] == [STEPS, STEPS]


def test_several_recordings_cannot_make_one_page(
    job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["report", str(job / "records"), "--html", str(job / "page.html")])
    assert code == ExitCode.USAGE and "--html of several recordings" in capsys.readouterr().err
    assert not (job / "page.html").exists()
