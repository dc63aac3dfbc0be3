"""`gpuwhy try` refuses what it cannot do, in one line with its exit code, before running much."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuwhy.cli import main
from support import framework_env


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], "no command given"),
        (["--steps", "5", "--", "python", "x.py"], "--steps 5: too few"),
        (["--rounds", "0", "--", "python", "x.py"], "--rounds 0: out of range"),
        (["--time", "-1", "--", "python", "x.py"], "--time -1: out of range"),
        (["--fix", "torch.workers=2", "--", "python", "x.py"], "unknown setting"),
        (["--fix", "tf.deterministic=false", "--", "python", "x.py"], "--allow-reorder"),
        (["--json", "/no/such/folder/x.json", "--", "python", "x.py"], "no such folder"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    args: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["try", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gpuwhy: try") and words in err, err


@pytest.mark.parametrize(
    "command",
    [
        ["torchrun", "--nproc-per-node", "2", "train.py"],
        ["python", "-m", "torch.distributed.run", "train.py"],
        ["srun", "python", "train.py"],
    ],
)
def test_a_distributed_launch_is_refused_with_exit_5(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["try", "--", *command]) == 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "distributed launch" in err, err


def test_a_missing_command_exits_127(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["try", "--", "no-such-command-anywhere"]) == 127
    assert "no-such-command-anywhere" in capsys.readouterr().err


def test_a_job_that_runs_no_steps_cannot_be_tried(tmp_path: Path) -> None:
    python = framework_env("bare")
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "try", "--", str(python), "-c", "print('hello')"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 5, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("gpuwhy: try: the job as written measured nothing"), last
    assert done.stdout == "" and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing left behind
