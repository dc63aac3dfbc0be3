"""The job's command line after `--`, shared by the subcommands that start one (run, try)."""

from __future__ import annotations

from collections.abc import Sequence

from gpuwhy.errors import UsageError


def job_command(words: Sequence[str], subcommand: str) -> list[str]:
    """The command to start, from argparse's remainder; a usage error when there is none."""
    command = list(words)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError(
            f"{subcommand}: no command given",
            f"usage: gpuwhy {subcommand} [options] -- python train.py",
        )
    return command
