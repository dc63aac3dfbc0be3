"""Default recording names keep runs apart and say what ran."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from gpuwhy.runtime.paths import default_recording_path, run_name


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
