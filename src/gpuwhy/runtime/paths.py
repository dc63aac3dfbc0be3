"""Where recordings go when the user does not name one, or names only a folder."""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from gpuwhy.errors import RecordingError
from gpuwhy.recording import schema

RUNS_DIR = "gpuwhy-runs"
SUFFIX = schema.FILE_SUFFIX


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
    return _unique(Path(directory), f"{when}-{run_name(command)}")


def node_recording_path(
    command: Sequence[str],
    directory: str | os.PathLike[str],
    *,
    environ: Mapping[str, str],
    host: str,
    pid: int,
    now: dt.datetime | None = None,
) -> Path:
    """`gpuwhy run --record DIR/` on each node of a job: ``<UTC time>-<job>-<node>.gpuwhy.db``,
    so that every node's recording lands apart in one shared folder. The job is SLURM's job id
    where there is one, else the command's name; the node is SLURM's node index, else the host
    and this process (two nodes on one host stay apart)."""
    when = (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    job = environ.get("SLURM_JOB_ID") or run_name(command)
    node = environ.get("SLURM_NODEID")
    where = f"node{node}" if node and node.isdigit() else f"{host}-{pid}"
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{when}-{job}-{where}")
    return _unique(Path(directory), name)


def _unique(folder: Path, stem: str) -> Path:
    """``folder/stem.gpuwhy.db``, or with a ``-2``, ``-3``… where that exists; claimed at once
    (schema.claim), so that runs started in the same second in one folder keep apart. The
    folder is created if need be; `schema.release` gives back a name never written into."""
    path = folder / f"{stem}{SUFFIX}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        counter = 2
        while not schema.claim(path):
            path = folder / f"{stem}-{counter}{SUFFIX}"
            counter += 1
    except OSError as error:
        reason = "it is a file" if folder.is_file() else error.strerror or str(error)
        raise RecordingError(
            f"cannot create a recording in {folder}{os.sep}: {reason}",
            "run from a folder you can write to, or give --record PATH",
        ) from error
    return path
