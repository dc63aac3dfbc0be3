"""Exit codes and the error hierarchy for people-facing failures.

A `GpuwhyError` is a user-level problem (a wrong flag, a bad file, a missing GPU): the CLI prints
its one-line message and fix and exits with its code, never a traceback.
"""

from __future__ import annotations

import sys
from enum import IntEnum


class ExitCode(IntEnum):
    """Documented exit codes of the `gpuwhy` command (README, "Exit codes")."""

    OK = 0
    PROBLEMS = 1  # an error-severity finding was reported
    USAGE = 2  # unknown flag, bad argument, missing/corrupt/foreign file
    NO_DEVICE = 3  # the command needs a GPU (watch) and none is usable
    # `--fail-on CODES` (run, report): a listed finding appeared. 4 because no common training
    # failure exits with it: Python uses 1 (uncaught exception), 2 (bad command line) and 120;
    # the shell 126, 127 and 128+N (137 for the OOM killer, 139 for a segfault).
    FINDINGS_MATCHED = 4
    # `try`: the job cannot be tried (it ran no steps as written, no fix applies to it, or it is
    # a distributed launch that cannot be restarted safely).
    CANNOT_TRY = 5
    # `run` exits with the child's own code; these are the shell's conventions for a child that
    # could not start, so scripts can tell them apart from the training's own failures.
    CANNOT_EXECUTE = 126
    COMMAND_NOT_FOUND = 127
    INTERRUPTED = 130  # gpuwhy itself was interrupted (Ctrl-C) outside a child
    INTERNAL = 70  # a bug in gpuwhy (EX_SOFTWARE): the message asks for a report


class GpuwhyError(Exception):
    """Base of every error the CLI turns into a one-line message and an exit code."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def one_line(self) -> str:
        """The message a person sees: what is wrong, then what to do."""
        return f"{self.message} — {self.fix}" if self.fix else self.message


class UsageError(GpuwhyError):
    """A wrong flag or argument."""

    exit_code = ExitCode.USAGE


class InputFileError(GpuwhyError):
    """A file given to gpuwhy is missing, unreadable, truncated or of another kind."""

    exit_code = ExitCode.USAGE


class RecordingError(InputFileError):
    """A recording cannot be read: missing, truncated, corrupt or foreign."""


class NoDeviceError(GpuwhyError):
    """The command needs a usable NVIDIA GPU and none is."""

    exit_code = ExitCode.NO_DEVICE


def interrupted() -> int:
    """A Ctrl-C stopped gpuwhy (not a child it runs): its one line, and the exit code."""
    forget_interrupt()
    print("gpuwhy: interrupted", file=sys.stderr)
    return ExitCode.INTERRUPTED


def forget_interrupt() -> None:
    """Call where a Ctrl-C was handled: the exit code stays the one gpuwhy chose.

    A KeyboardInterrupt raised inside code that `exec` ran from a string (a dataclass being
    made, as modules load) sets CPython's "unhandled Ctrl-C" flag even when it is caught, and
    `python -m gpuwhy` then ends killed by SIGINT instead of exiting 130 (seen in 1 run in 40
    of a report interrupted while its page's modules loaded; CPython 3.10 to 3.13). Evaluating
    a string clears the flag.
    """
    exec("")
