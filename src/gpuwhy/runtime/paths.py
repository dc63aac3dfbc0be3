"""Where recordings go when the user does not name one."""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Sequence
from pathlib import Path

RUNS_DIR = "gpuwhy-runs"
SUFFIX = ".gpuwhy.db"


def run_name(command: Sequence[str]) -> str:
    """A short, file-safe name for a command: the script for ``python train.py``, else the program.

    ``python -m pkg.train`` gives ``pkg.train``; ``python -c …`` gives ``python``.
    """
    if not command:
        return "run"
    name = os.path.basename(command[0])
    if re.fullmatch(r"python[\d.]*", name):
        args = list(command[1:])
        while args:
            arg = args.pop(0)
            if arg == "-m" and args:
                name = args[0]
                break
            if arg == "-c":
                break
            if not arg.startswith("-"):
                name = os.path.basename(arg)
                break
    name = name.removesuffix(".py")
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "run"


def default_recording_path(
    command: Sequence[str],
    *,
    now: dt.datetime | None = None,
    directory: str | os.PathLike[str] = RUNS_DIR,
) -> Path:
    """``gpuwhy-runs/<UTC time>-<name>.gpuwhy.db``, unique: a ``-2``, ``-3``… keeps runs apart."""
    when = (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    stem = f"{when}-{run_name(command)}"
    folder = Path(directory)
    path = folder / f"{stem}{SUFFIX}"
    counter = 2
    while path.exists():
        path = folder / f"{stem}-{counter}{SUFFIX}"
        counter += 1
    return path
