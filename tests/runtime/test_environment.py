"""Which interpreter a job runs under, and the background probe of its environment."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from gpuwhy.runtime.environment import EnvironmentProbe, is_python, job_interpreter


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    _executable(folder / "python3", "#!/bin/sh\n")
    return folder


def test_is_python() -> None:
    assert all(map(is_python, ["python", "python3", "/x/python3.11", "python3.13t"]))
    assert not any(map(is_python, ["pythonista", "ipython", "torchrun", "python-config"]))


def test_python_command_resolves_on_the_jobs_path(bin_dir: Path) -> None:
    env = {"PATH": str(bin_dir)}
    assert job_interpreter(["python3", "train.py"], env) == str(bin_dir / "python3")
    assert job_interpreter([sys.executable, "-m", "pkg"], env) == sys.executable


def test_script_with_a_python_shebang_gives_its_interpreter(bin_dir: Path) -> None:
    env = {"PATH": str(bin_dir)}
    direct = _executable(bin_dir / "torchrun", "#!/opt/venv/bin/python3.11\nimport x\n")
    assert job_interpreter([str(direct)], env) == "/opt/venv/bin/python3.11"
    assert job_interpreter(["torchrun", "--nproc-per-node=2", "t.py"], env) == (
        "/opt/venv/bin/python3.11"
    )
    via_env = _executable(bin_dir / "accelerate", "#!/usr/bin/env -S python3 -u\n")
    assert job_interpreter([str(via_env)], env) == str(bin_dir / "python3")


def test_other_commands_fall_back_to_the_first_python_on_path(bin_dir: Path) -> None:
    env = {"PATH": str(bin_dir)}
    shell = _executable(bin_dir / "train.sh", "#!/bin/sh\npython3 train.py\n")
    assert job_interpreter([str(shell)], env) == str(bin_dir / "python3")
    assert job_interpreter(["bash", "-c", "x"], {"PATH": "/nonexistent"}) is None


def test_probe_collects_facts_and_findings_for_the_interpreter() -> None:
    # The bare environment where it exists: the probe of one with frameworks takes seconds.
    root = os.environ.get("GPUWHY_TEST_ENVS")
    bare = Path(root or "", "bare", "bin", "python")
    python = str(bare) if root and Path(root, "bare", ".done").exists() else sys.executable
    probe = EnvironmentProbe(python)
    probe.start()
    result = probe.finish(wait_s=120)
    assert probe.error is None, probe.error
    assert result is not None
    assert "schema_version" in result["facts"]
    assert python in str(result["facts"])  # the facts are about the job's interpreter
    assert isinstance(result["findings"], list)
    assert all({"code", "severity", "title"} <= set(item) for item in result["findings"])


def test_an_unfinished_probe_is_killed_with_its_children(tmp_path: Path) -> None:
    # An interpreter whose probe hangs: a script that sleeps where Python would answer.
    slow = _executable(tmp_path / "python3", "#!/bin/sh\nsleep 30\n")
    probe = EnvironmentProbe(str(slow), timeout_s=30)
    probe.start()
    started = time.monotonic()
    assert probe.finish(wait_s=0.5) is None
    assert time.monotonic() - started < 5
    assert probe.error is not None and "not done within 0.5 s" in probe.error
    assert probe._process is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(probe._process.pid, 0)  # the whole probe group is gone
