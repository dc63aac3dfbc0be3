"""Which interpreter a job runs under, and the background probe of its environment."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpuwhy.recording import Recording
from gpuwhy.runtime.environment import (
    NOTICE_AFTER_S,
    EnvironmentProbe,
    is_python,
    job_interpreter,
)


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


def test_a_long_wait_at_the_jobs_end_is_said_once(tmp_path: Path) -> None:
    slow = _executable(tmp_path / "python3", "#!/bin/sh\nsleep 3\n")  # answers nothing, late
    probe = EnvironmentProbe(str(slow), timeout_s=30)
    probe.start()
    said: list[float] = []
    started = time.monotonic()
    probe.finish(wait_s=30, on_slow=lambda: said.append(time.monotonic() - started))
    assert len(said) == 1 and NOTICE_AFTER_S <= said[0] < 3, said


def test_a_signal_at_the_jobs_end_skips_the_probe_and_says_so(tmp_path: Path) -> None:
    slow = _executable(tmp_path / "python3", "#!/bin/sh\nsleep 30\n")
    probe = EnvironmentProbe(str(slow), timeout_s=30)
    probe.start()
    hurry = threading.Event()
    hurry.set()  # Ctrl-C once the job had ended (FinishGuard)
    started = time.monotonic()
    assert probe.finish(cancel=hurry) is None
    assert time.monotonic() - started < 5
    assert probe.error == "environment probe stopped at the job's end by a signal"


@pytest.mark.slow
def test_a_job_shorter_than_a_cold_probe_still_gets_its_facts_and_warms_the_cache(
    tmp_path: Path,
) -> None:
    """The quick check a user runs first (`python -c ...`) ends long before its interpreter's
    frameworks are probed from cold: the run waits for the probe, records its facts and stores
    them, so the next run reads them from the cache. Killed at the job's end, the probe stored
    nothing, and every such run waited, probed from cold again and recorded no facts."""
    env = {**os.environ, "GPUWHY_CACHE_DIR": str(tmp_path / "cache")}
    facts = []
    for run in ("cold", "warm"):
        record = tmp_path / f"{run}.gpuwhy.db"
        done = subprocess.run(
            [sys.executable, "-m", "gpuwhy", "run", "--record", str(record), "--",
             sys.executable, "-c", "pass"],
            capture_output=True, text=True, timeout=120, env=env, check=False, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        with Recording.open(record) as recording:
            assert "environment_error" not in recording.meta, recording.meta
            facts.append(recording.meta["environment"]["facts"])
    assert [f["collected"]["frameworks_cached"] for f in facts] == [False, True]
    assert facts[1]["frameworks"] == facts[0]["frameworks"]
    assert facts[0]["frameworks"], "this interpreter has frameworks to probe"
    assert list((tmp_path / "cache").glob("frameworks-*.json"))
