"""Running `gpuwhy try` from the tests, on the test job made for it (tests/tryout/try_job.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import ROOT

TRY_JOB = ROOT / "tests" / "tryout" / "try_job.py"


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
