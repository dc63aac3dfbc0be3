"""Default recording names keep runs apart and say what ran."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuwhy.errors import RecordingError
from gpuwhy.recording import schema
from gpuwhy.runtime.paths import default_recording_path, node_recording_path, run_name


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (["python", "train.py", "--lr", "3"], "train"),
        (["/usr/bin/python3.11", "-u", "scripts/fit model.py"], "fit_model"),
        (["python", "-m", "pkg.train"], "pkg.train"),
        (["python", "-c", "print(1)"], "python"),
        (["torchrun", "--nproc-per-node=2", "train.py"], "torchrun"),
        (["./run.sh"], "run.sh"),
        ([], "run"),
    ],
)
def test_run_name(command: list[str], name: str) -> None:
    assert run_name(command) == name


def test_default_path_is_timestamped_and_never_reuses_a_name(tmp_path: Path) -> None:
    now = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    first = default_recording_path(["python", "train.py"], now=now, directory=tmp_path)
    assert first == tmp_path / "20260102T030405Z-train.gpuwhy.db"
    first.touch()
    second = default_recording_path(["python", "train.py"], now=now, directory=tmp_path)
    assert second == tmp_path / "20260102T030405Z-train-2.gpuwhy.db"


def test_each_node_of_a_job_names_its_own_recording(tmp_path: Path) -> None:
    now = dt.datetime(2026, 11, 26, 1, 2, 3, tzinfo=dt.timezone.utc)
    command = ["torchrun", "--nnodes", "4", "train.py"]
    slurm = {"SLURM_JOB_ID": "9001", "SLURM_NODEID": "3"}
    path = node_recording_path(command, tmp_path, environ=slurm, host="gpu-a", pid=7, now=now)
    assert path == tmp_path / "20261126T010203Z-9001-node3.gpuwhy.db"
    # No scheduler: the command's name, and the host with gpuwhy's pid (two on one host).
    bare = node_recording_path(command, tmp_path, environ={}, host="gpu a", pid=7, now=now)
    assert bare.name == "20261126T010203Z-torchrun-gpu_a-7.gpuwhy.db"
    path.touch()
    again = node_recording_path(command, tmp_path, environ=slurm, host="gpu-a", pid=7, now=now)
    assert again.name == "20261126T010203Z-9001-node3-2.gpuwhy.db"  # never the same file twice


_PICK = """
import datetime as dt, sys, time
from gpuwhy.runtime.paths import default_recording_path
start = float(sys.argv[2])
while time.time() < start:
    pass
now = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
print(default_recording_path(["python", "train.py"], now=now, directory=sys.argv[1]).name)
"""


def test_runs_that_pick_a_name_in_the_same_second_never_share_it(tmp_path: Path) -> None:
    # Real processes racing for one name, all let go at one moment: each claims its own (an
    # exclusive empty file).
    start = time.time() + 1.5
    pickers = [
        subprocess.Popen(
            [sys.executable, "-c", _PICK, str(tmp_path / "runs"), str(start)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    names = [picker.communicate(timeout=60)[0].strip() for picker in pickers]
    assert len(set(names)) == 6, names
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted(names)


def test_a_claimed_name_never_written_into_is_given_back(tmp_path: Path) -> None:
    path = default_recording_path(["python", "train.py"], directory=tmp_path)
    assert path.exists() and path.stat().st_size == 0  # claimed
    schema.release(path)
    assert not path.exists()
    # Once a recording is written into it, the name is no longer a claim: release keeps it.
    kept = default_recording_path(["python", "train.py"], directory=tmp_path)
    schema.create_empty(kept).close()
    schema.release(kept)
    assert kept.stat().st_size > 0


def test_only_this_processes_claim_is_taken_over(tmp_path: Path) -> None:
    someone_elses = tmp_path / "r.gpuwhy.db"
    someone_elses.touch()  # empty, but not claimed here: never overwritten
    with pytest.raises(RecordingError, match="already exists"):
        schema.create_empty(someone_elses)
