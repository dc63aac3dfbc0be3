"""An internal error, as the README promises: one line naming it and a crash file, exit 70.

Errors are forced by patching a gpuwhy function, in-process through `main` and once in a real
process through `console_main`; `run` keeps the command's exit code (README, "Exit codes").
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

import gpuwhy.cli
import gpuwhy.cli.doctor  # patched below: loaded by `main` only when it runs doctor
from gpuwhy._version import __version__
from gpuwhy.cli import crash
from gpuwhy.errors import ExitCode
from support import DATA, ROOT

TOKEN = "hf_" + "a1" * 15  # shaped like a Hugging Face token: masked in the crash file
FACTS = DATA / "facts" / "constructed-linux-a100-healthy.json"
ARGS = {
    "doctor": ["doctor", "--json"],
    "run": ["run", "--", "true"],
    "report": ["report", TOKEN],
    "export": ["export", "r.gpuwhy.db", "--perfetto", "t.json"],
    "watch": ["watch", "--once"],
}


def _job_python() -> str:
    """The bare test environment where it exists: `run` probes it in well under a second."""
    root = os.environ.get("GPUWHY_TEST_ENVS")
    if root and Path(root, "bare", ".done").exists():
        return str(Path(root, "bare", "bin", "python"))
    return sys.executable


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("GPUWHY_CACHE_DIR", str(folder))
    return folder


def _crash_files(cache: Path) -> list[Path]:
    return sorted((cache / "crashes").glob("gpuwhy-crash-*.txt"))


def _the_one_line(err: str, summary: str, cache: Path) -> Path:
    """The crash line is the last line on stderr and names the single crash file."""
    (path,) = _crash_files(cache)
    assert "Traceback" not in err
    last = err.rstrip("\n").splitlines()[-1]
    assert last == (f"gpuwhy: internal error: {summary} — details in {path}; please report it")
    return path


def _broken(*args: object, **kwargs: object) -> int:
    raise ZeroDivisionError("cannot divide\n  by zero")


@pytest.mark.parametrize("command", sorted(ARGS))
def test_a_bug_in_any_subcommand_is_one_line_a_crash_file_and_exit_70(
    command: str,
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    module = __import__(f"gpuwhy.cli.{command}", fromlist=["_handle"])
    monkeypatch.setattr(module, "_handle", _broken)  # build_parser registers it afresh
    assert gpuwhy.cli.main(ARGS[command]) == ExitCode.INTERNAL == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    path = _the_one_line(err, "ZeroDivisionError: cannot divide by zero", cache)
    text = path.read_text()
    assert text.startswith(f"gpuwhy {__version__} internal error, ")
    assert f"python: {platform.python_version()} ({sys.executable})" in text
    assert f"platform: {platform.platform()}" in text
    assert f"command: gpuwhy {command} " in text
    assert "Traceback (most recent call last)" in text and "in _broken" in text
    assert text.rstrip().endswith("ZeroDivisionError: cannot divide\n  by zero")
    assert TOKEN not in text and (command != "report" or "report '***'" in text)
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_a_bug_in_a_real_process_exits_70_with_no_traceback(tmp_path: Path) -> None:
    """`gpuwhy doctor` in its own process, one of its rules broken by a wrapper."""
    wrapper = (
        "import sys, gpuwhy.env\n"
        "def broken(*args, **kwargs):\n"
        "    raise KeyError('tier')\n"
        "gpuwhy.env.evaluate = broken\n"
        "from gpuwhy.cli import console_main\n"
        "console_main()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "GPUWHY_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", wrapper, "doctor", "--from", str(FACTS)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 70, done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1
    path = _the_one_line(done.stderr, "KeyError: 'tier'", tmp_path)
    assert "in broken" in path.read_text() and f"doctor --from {FACTS}" in path.read_text()


def test_run_keeps_waiting_for_the_command_and_its_exit_code_when_gpuwhy_fails(
    tmp_path: Path,
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gpuwhy.runtime.session import Session

    def broken(self: Session, *args: object, **kwargs: object) -> None:
        raise RuntimeError("sampler would not start")

    monkeypatch.setattr(Session, "start", broken)  # fails just after the command started
    done = tmp_path / "done"
    job = (
        "import pathlib, sys, time; time.sleep(0.5); pathlib.Path(sys.argv[1]).write_text('x');"
        "sys.exit(3)"
    )
    code = gpuwhy.cli.main(
        [
            "run",
            "--record",
            str(tmp_path / "r.gpuwhy.db"),
            "--",
            _job_python(),
            "-c",
            job,
            str(done),
        ]
    )
    assert code == 3  # the command's own exit code
    assert done.exists()  # gpuwhy waited for the command to finish
    _the_one_line(capsys.readouterr().err, "RuntimeError: sampler would not start", cache)


@pytest.mark.parametrize(
    ("job_exit", "gate", "expected"),
    [
        (5, [], 5),  # the command's own code, as always
        (0, [], 0),
        (5, ["--fail-on", "warning"], 5),  # a failed command's code wins over the gate
        (0, ["--fail-on", "warning"], 70),  # the gate went unchecked: never a silent pass
    ],
)
def test_run_crashing_after_the_command_keeps_its_exit_code(
    job_exit: int,
    gate: list[str],
    expected: int,
    tmp_path: Path,
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import gpuwhy.cli.report

    def broken(*args: object, **kwargs: object) -> object:
        raise IndexError("analysis went wrong")

    monkeypatch.setattr(gpuwhy.cli.report, "analyse", broken)
    code = gpuwhy.cli.main(
        [
            "run",
            *gate,
            "--record",
            str(tmp_path / "r.gpuwhy.db"),
            "--",
            _job_python(),
            "-c",
            f"raise SystemExit({job_exit})",
        ]
    )
    assert code == expected
    _the_one_line(capsys.readouterr().err, "IndexError: analysis went wrong", cache)
    assert (tmp_path / "r.gpuwhy.db").exists()  # the recording is kept for a later report


def test_an_unwritable_cache_folder_falls_back_to_the_temporary_one(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("GPUWHY_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # gettempdir() reads TMPDIR again
    monkeypatch.setattr(gpuwhy.cli.doctor, "_handle", _broken)
    assert gpuwhy.cli.main(["doctor"]) == 70
    (path,) = tmp_path.glob("gpuwhy-crash-*.txt")
    assert f"details in {path}; please report it" in capsys.readouterr().err


def test_with_nowhere_to_write_the_details_go_to_stderr(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(crash, "crash_folders", lambda environ: [blocker / "crashes"])
    monkeypatch.setattr(gpuwhy.cli.doctor, "_handle", _broken)
    assert gpuwhy.cli.main(["doctor"]) == 70
    first, *rest = capsys.readouterr().err.splitlines()
    assert first == (
        "gpuwhy: internal error: ZeroDivisionError: cannot divide by zero — no "
        "crash file could be written, the details follow; please report them"
    )
    assert "Traceback (most recent call last):" in rest and "  by zero" in rest


def test_ctrl_c_is_not_a_crash_and_sys_exit_passes_through(
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def interrupted(*args: object) -> int:
        raise KeyboardInterrupt

    def exits(*args: object) -> int:
        raise SystemExit(9)

    monkeypatch.setattr(gpuwhy.cli.doctor, "_handle", interrupted)
    assert gpuwhy.cli.main(["doctor"]) == ExitCode.INTERRUPTED == 130
    assert capsys.readouterr().err == "gpuwhy: interrupted\n"
    monkeypatch.setattr(gpuwhy.cli.doctor, "_handle", exits)
    with pytest.raises(SystemExit) as caught:
        gpuwhy.cli.main(["doctor"])
    assert caught.value.code == 9
    assert _crash_files(cache) == []


def test_a_long_message_is_cut_to_one_readable_line() -> None:
    summary = crash.one_line_summary(ValueError("x" * 500 + "\n" + "y"))
    assert summary == "ValueError: " + "x" * (crash.MESSAGE_CHARS - 1) + "…"
    assert crash.one_line_summary(AssertionError()) == "AssertionError"


# A Ctrl-C that lands while the command's modules load: raised by an import hook at the first
# of them, in a real interpreter that runs the console script's own entry point.
_INTERRUPTED_IMPORT = """
import sys

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "gpuwhy.cli":
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = ["gpuwhy", "doctor"]
from gpuwhy.__main__ import run
run()
"""


def test_ctrl_c_while_the_command_loads_is_one_line_and_exit_130() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IMPORT],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert done.returncode == ExitCode.INTERRUPTED == 130
    assert done.stderr == "gpuwhy: interrupted\n" and done.stdout == ""


def test_the_console_script_runs_the_entry_point_that_catches_it() -> None:
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"gpuwhy": "gpuwhy.__main__:run"}


# A Ctrl-C that lands inside code `exec` runs from a string (a dataclass being made while the
# report's page modules load: seen once in 40 interrupted reports): handled all the same.
_SITECUSTOMIZE = """
import importlib.machinery
import sys

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name != "gpuwhy.cli.doctor":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            module._handle = lambda *args: exec("raise KeyboardInterrupt")

        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Interrupt())
"""


def test_ctrl_c_inside_code_run_by_exec_still_exits_130(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "doctor"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "src")])},
    )
    assert done.returncode == ExitCode.INTERRUPTED, (done.returncode, done.stderr[-2000:])
    assert done.stderr == "gpuwhy: interrupted\n"
