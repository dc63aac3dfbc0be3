"""Running `gpuwhy try` from the tests, on the test job made for it (tests/tryout/try_job.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from support import ROOT

TRY_JOB = ROOT / "tests" / "tryout" / "try_job.py"


def job_module() -> ModuleType:
    """try_job.py as a module, for its sizes (it imports a framework only when it trains)."""
    spec = importlib.util.spec_from_file_location("try_job", TRY_JOB)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gpuwhy_try(
    args: list[str], cwd: Path, *, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """`python -m gpuwhy try ARGS` in `cwd`, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "gpuwhy", "try", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )
