"""The package as a user meets it: import cost, console script, usage errors, the built wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from support import ROOT, framework_env

SRC = ROOT / "src"
FRAMEWORKS = ("tensorflow", "torch", "jax", "keras", "pynvml", "psutil", "rich")


def _gpuwhy(*args: str, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [python, "-m", "gpuwhy", *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_import_gpuwhy_imports_no_framework_even_where_all_are_installed() -> None:
    code = (
        "import sys, gpuwhy, gpuwhy.cli; gpuwhy.cli.build_parser();"
        f"print(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert out.stdout.strip() == "[]"


def test_a_subcommand_builds_only_its_own_parser() -> None:
    code = (
        "import sys, gpuwhy.cli\n"
        "parser = gpuwhy.cli.build_parser(only='run')\n"
        "own = ('gpuwhy.cli.run', 'gpuwhy.cli.fail_on', 'gpuwhy.cli.job_command',\n"
        "       'gpuwhy.cli.metrics')\n"
        "others = sorted(m for m in sys.modules if m.startswith('gpuwhy.cli.') and m not in own)\n"
        "print(sorted(parser._subparsers._group_actions[0].choices), others)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert out.stdout.strip() == "['run'] []"
    # A misspelt command still gets the whole list to choose from.
    result = _gpuwhy("rnu")
    assert result.returncode == 2 and "invalid choice" in result.stderr
    names = ("doctor", "run", "try", "report", "watch", "export")
    assert all(name in result.stderr for name in names)


def test_version_answers_well_under_half_a_second() -> None:
    _gpuwhy("--version")  # warm the file cache
    best = min(_timed(lambda: _gpuwhy("--version")) for _ in range(5))
    assert best < 0.5, f"gpuwhy --version took {best:.3f} s"


def _timed(fn: object) -> float:
    start = time.perf_counter()
    result = fn()  # type: ignore[operator]
    assert result.returncode == 0 and result.stdout.startswith("gpuwhy ")
    return time.perf_counter() - start


def test_help_and_import_work_in_an_environment_with_nothing_installed() -> None:
    bare = framework_env("bare")
    assert subprocess.run([bare, "-c", "import rich"], capture_output=True).returncode != 0
    result = _gpuwhy("--help", python=str(bare))
    assert result.returncode == 0, result.stderr
    assert "doctor" in result.stdout and "run" in result.stdout
    for command in ("doctor", "run", "report", "watch", "export"):
        sub = _gpuwhy(command, "--help", python=str(bare))
        assert sub.returncode == 0, sub.stderr


@pytest.mark.parametrize(
    "args",
    [["--bogus"], ["doctor", "--no-such-flag"], ["report"], ["no-such-command"]],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str]) -> None:
    result = _gpuwhy(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuwhy"), result.stderr
    assert "Traceback" not in result.stderr


def test_no_command_prints_help_and_exits_2() -> None:
    result = _gpuwhy()
    assert result.returncode == 2 and "usage: gpuwhy" in result.stderr


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "gpuwhy"
    if not script.exists():
        pytest.skip("gpuwhy is not installed in this interpreter's environment")
    result = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stdout.startswith("gpuwhy ")


@pytest.mark.slow
def test_wheel_ships_code_data_and_typing_marker(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("gpuwhy-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    source_files = {
        "gpuwhy/" + str(p.relative_to(SRC / "gpuwhy"))
        for p in (SRC / "gpuwhy").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert source_files - names == set()
    assert "gpuwhy/py.typed" in names
    # Test support (the synthetic recording generator) stays out of what users install.
    assert not [n for n in names if "synth" in n or n.startswith(("tests/", "support/"))]


def test_setup_stops_in_one_line_when_the_disk_is_short() -> None:
    script = str(ROOT / "scripts" / "need-space.sh")
    short = subprocess.run(
        ["bash", script, "Setting up .venv", str(2**40)], capture_output=True, text=True, timeout=30
    )
    assert short.returncode == 3
    lines = short.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Setting up .venv needs about 1073741824 GB")
    assert f"disk holding {ROOT}" in lines[0] and "free some space there" in lines[0]
    enough = subprocess.run(
        ["bash", script, "Setting up .venv", "1"], capture_output=True, text=True, timeout=30
    )
    assert (enough.returncode, enough.stderr) == (0, "")


def test_a_timing_test_measured_again_is_named_in_the_summary(tmp_path: Path) -> None:
    (tmp_path / "test_timing.py").write_text(
        "def test_retried(record_property):\n"
        "    record_property('retried', 'speed-up 1.10 vs measured 1.52')\n"
        "def test_first_time(record_property):\n"
        "    record_property('other', 'kept out of the list')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}  # tests/conftest.py as a plugin
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "conftest",
            "-p",
            "no:cacheprovider",
            "-q",
            "test_timing.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout
    section = done.stdout.split("measured again after a miss", 1)[1]
    assert (
        "test_timing.py::test_retried: first attempt missed: speed-up 1.10 vs measured 1.52"
        in section
    )
    assert "test_first_time" not in section
