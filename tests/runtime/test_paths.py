"""Default recording names keep runs apart and say what ran."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

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
