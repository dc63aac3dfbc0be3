"""Helpers shared by the tests and benches (importable as `support`: pyproject puts tests/ on the
path; bench/ scripts add it). `support.synth` makes synthetic recordings at any scale."""

from __future__ import annotations

import importlib.util
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def module_at(path: Path) -> ModuleType:
    """The Python file at `path`, executed as a module of its own (for a job's or an example's
    sizes: module constants, read without running the job)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def framework_env(name: str) -> Path:
    """The interpreter of a real test environment made by scripts/test-envs.sh.

    Skips where the environments were not made (a quick local run); in CI a missing one fails,
    so a broken setup can never pass as skipped tests. One that this machine cannot have
    (no Python 3.12 for `py312-jax`) holds a note saying why instead: skipped, in CI too.
    """
    root = os.environ.get("GPUWHY_TEST_ENVS")
    python = Path(root, name, "bin", "python") if root else None
    if python is not None and python.exists() and Path(root, name, ".done").exists():  # type: ignore[arg-type]
        return python
    absent = Path(root, name, ".absent") if root else None
    if absent is not None and absent.exists():
        pytest.skip(f"test environment {name!r}: {absent.read_text().strip()}")
    message = f"test environment {name!r} missing: run scripts/test-envs.sh"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def format_1_file(path: Path) -> None:
    """The header of a format-1 recording (gpuwhy before the block format), which no gpuwhy
    since reads: enough for the reader to recognise, and refuse, the format."""
    from gpuwhy.recording import schema

    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
        db.execute("PRAGMA user_version = 1")
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)")
    db.close()


def assert_usage_error(script: Path, args: list[str]) -> None:
    """`python SCRIPT ARGS` refuses bad arguments as promised: exit 2, nothing on stdout, one
    line on stderr that names the script, no traceback."""
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"{script.name}: ") and "Traceback" not in done.stderr


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a server a test starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
