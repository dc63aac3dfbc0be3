"""What an unexpected exception in gpuwhy becomes: one line, a crash file, exit code 70.

A bug must neither greet people with a traceback nor lose it: the traceback goes to a file,
with what a bug report needs (versions, platform, the command line), and the one line on stderr
names that file. The file is meant to be attached to a report, so its command line has what
looks like a credential masked, as in the reports. It lands in gpuwhy's cache folder
(``$GPUWHY_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpuwhy``, else ``~/.cache/gpuwhy``) under
``crashes/``, or in the temporary folder when that cannot be written.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import shlex
import sys
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from gpuwhy._version import __version__
from gpuwhy.errors import ExitCode

CRASH_FOLDER = "crashes"
MESSAGE_CHARS = 200  # the one line stays one line on a terminal


class CrashWithExitCode(Exception):
    """An internal error raised after something else settled the exit code.

    `run` raises it (from the original error) once its command has started: the crash is
    reported like any other, and gpuwhy still exits with ``exit_code``, the command's own.
    """

    def __init__(self, exit_code: int) -> None:
        super().__init__(f"internal error; exit code {exit_code} kept")
        self.exit_code = exit_code


def report_crash(
    error: BaseException,
    argv: Sequence[str],
    stream: TextIO | None = None,
    *,
    environ: Mapping[str, str] = os.environ,
) -> int:
    """Write the crash file, say so in one line on ``stream``; the exit code to end with."""
    stream = sys.stderr if stream is None else stream
    exit_code = int(ExitCode.INTERNAL)
    if isinstance(error, CrashWithExitCode) and error.__cause__ is not None:
        exit_code, error = error.exit_code, error.__cause__
    path = write_crash_file(error, argv, environ=environ)
    summary = one_line_summary(error)
    try:
        if path is not None:
            stream.write(
                f"gpuwhy: internal error: {summary} — details in {path}; please report it\n"
            )
        else:  # nowhere to write: the details go to the terminal rather than nowhere
            stream.write(
                f"gpuwhy: internal error: {summary} — no crash file could be written, the "
                "details follow; please report them\n"
            )
            stream.write(crash_text(error, argv))
        stream.flush()
    except (OSError, ValueError):
        pass  # stderr is gone: the exit code still says it
    return exit_code


def one_line_summary(error: BaseException) -> str:
    """``ExcType: message``, the message folded onto one line and cut to a readable length."""
    message = " ".join(str(error).split())
    if len(message) > MESSAGE_CHARS:
        message = message[: MESSAGE_CHARS - 1] + "…"
    name = type(error).__name__
    return f"{name}: {message}" if message else name


def crash_text(error: BaseException, argv: Sequence[str]) -> str:
    """The crash file's content: what ran, where, and the full traceback (chained errors too)."""
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    head = [
        f"gpuwhy {__version__} internal error, {when}",
        f"command: {shlex.join(['gpuwhy', *_masked(argv)])}",
        f"working folder: {_cwd()}",
        f"python: {sys.version.split()[0]} ({sys.executable})",
        f"platform: {platform.platform()}",
        "",
    ]
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return "\n".join(head) + trace


def write_crash_file(
    error: BaseException, argv: Sequence[str], *, environ: Mapping[str, str] = os.environ
) -> Path | None:
    """The crash file written, or None when neither candidate folder takes it."""
    text = crash_text(error, argv)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    name = f"gpuwhy-crash-{stamp}-{os.getpid()}.txt"
    for folder in crash_folders(environ):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / name
            # Private (0600) and never over another file: the command line may hold secrets.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            return path
        except OSError:
            continue
    return None


def crash_folders(environ: Mapping[str, str] = os.environ) -> list[Path]:
    """Where a crash file may go, best first: gpuwhy's cache folder, then the temporary one."""
    folders = []
    # The cache folder's rule lives with the probe cache; a bug there must not stop us.
    with contextlib.suppress(Exception):
        from gpuwhy.env.probe_cache import default_cache_dir

        folders.append(default_cache_dir(environ) / CRASH_FOLDER)
    # gettempdir raises when no candidate folder is writable at all.
    with contextlib.suppress(Exception):
        folders.append(Path(tempfile.gettempdir()))
    return folders


def _masked(argv: Sequence[str]) -> list[str]:
    try:  # the reports' rule; should it fail, no command line beats a leaked credential
        from gpuwhy.redact import redact_command

        return redact_command(argv)
    except Exception:
        return ["(command line not shown: it could not be masked)"]


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError as error:  # the folder was removed under us
        return f"unknown ({error.strerror})"
