"""The `gpuwhy` command: `main(argv) -> int`, one module per subcommand.

Each subcommand module exposes ``register(subparsers) -> None`` which adds its parser and sets
``handler`` (a function ``(argparse.Namespace) -> int``). Imports of subcommand modules are cheap:
heavy work is imported inside the handler, so `gpuwhy --version` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from collections.abc import Sequence

from gpuwhy._version import __version__
from gpuwhy.errors import ExitCode, GpuwhyError, UsageError, interrupted

SUBCOMMANDS = ("doctor", "run", "try", "report", "watch", "export")
_MODULES = {"try": "try_cmd"}  # `try` is a Python keyword

EPILOG = """\
exit codes:
  0    fine                       1    problems found (an error-severity finding)
  2    usage error or bad file    3    no usable GPU (watch)
  4    a finding listed in --fail-on appeared (run, report)
  5    try: the job cannot be tried (no steps as written, no fix applies, distributed)
  70   internal error: one line, the details in a crash file (please report it)
  run: the command's own exit code, even when gpuwhy fails after starting it;
       126/127 when it cannot be executed/found; 4 only when the command itself succeeded
"""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and calling sys.exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        where = self.prog.removeprefix("gpuwhy").strip()
        text = f"{where}: {message}" if where else message
        raise UsageError(text, f"see '{self.prog} --help'")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole CLI, or with ``only`` just that subcommand (a command run imports no other)."""
    parser = _Parser(
        prog="gpuwhy",
        description="Is your training job really using the GPU, how well, and why not?",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpuwhy {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in (only,) if only in SUBCOMMANDS else SUBCOMMANDS:
        module = importlib.import_module(f"gpuwhy.cli.{_MODULES.get(name, name)}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code instead of exiting (testable, embeddable)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(only=args_list[0] if args_list else None)
        args = parser.parse_args(args_list)
        handler = getattr(args, "handler", None)
        if handler is None:
            parser.print_help(sys.stderr)
            return ExitCode.USAGE
        return int(handler(args))
    except GpuwhyError as error:
        print(f"gpuwhy: {error.one_line()}", file=sys.stderr)
        return int(error.exit_code)
    except KeyboardInterrupt:
        return interrupted()
    except BrokenPipeError:
        # `gpuwhy doctor --json | head`: the reader left; nothing useful to say.
        return ExitCode.OK
    except Exception as error:  # a bug in gpuwhy: one line, the traceback in a crash file, 70
        from gpuwhy.cli.crash import report_crash

        return report_crash(error, args_list)


def console_main() -> None:
    """Entry point of the console script and `python -m gpuwhy`."""
    code = main()
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.flush()
    sys.exit(code)
