"""`gpuwhy run [options] -- CMD [ARGS...]`: record a job, summarise it, exit with its exit code."""

from __future__ import annotations

import argparse
import math
import os
import socket
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from gpuwhy.cli import fail_on, metrics
from gpuwhy.cli.job_command import job_command
from gpuwhy.errors import ExitCode, UsageError

DESCRIPTION = """\
Start CMD, sample every GPU and the host while it runs, keep a recording and print a short
summary on stderr. gpuwhy exits with the command's own exit code (128+N if signal N killed it,
127 if it was not found, 126 if it could not be executed), also when gpuwhy itself fails once
the command has started: the command runs on, one line names the crash file, and its exit code
stands. The command's input and output pass through untouched.

--fail-on: when the command succeeded (exit 0) and a listed finding appears, gpuwhy exits with 4
and names the findings on stderr; when the command failed, its own exit code wins.

signals: SIGTERM, SIGHUP and SIGQUIT are passed on to the command. Ctrl-C (and Ctrl-\\)
reaches the command directly from the terminal and gpuwhy waits for it to end (without a
terminal, SIGINT is passed on); each further Ctrl-C sends the command SIGTERM. gpuwhy never
sends SIGKILL. The recording is finalised in every case.
"""

MIN_INTERVAL_S, MAX_INTERVAL_S = 0.01, 60.0
# `--profile`: the first steps are warm-up (compilation, autotuning, workers starting); a few
# steps after them are enough for kernel-level figures, and a trace grows by megabytes a step.
PROFILE_SKIP, PROFILE_STEPS, MAX_PROFILE_STEPS = 10, 5, 100


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="record a training job and explain its GPU use",
        description=DESCRIPTION,
        usage="gpuwhy run [options] -- CMD [ARGS...]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="recording to create (default: gpuwhy-runs/<UTC time>-<name>.gpuwhy.db); "
        "an existing file is never overwritten; a folder (DIR/): a name per node of a job in it "
        "(<UTC time>-<job>-<node>.gpuwhy.db), for `gpuwhy report DIR/`",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON to FILE")
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also write the report as one self-contained HTML page (timeline included) to FILE",
    )
    parser.add_argument(
        "--interval",
        metavar="S",
        type=float,
        default=0.1,
        help="sampling period in seconds (default 0.1: 10 Hz)",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no live status line and no summary (the recording's path is still shown; the "
        "recording is analysed only for --json, --html or --fail-on)",
    )
    parser.add_argument(
        "--no-redact",
        action="store_true",
        help="record the command as typed; by default anything that looks like a credential in "
        "it is masked in the recording and every report (docs/sharing.md)",
    )
    parser.add_argument(
        "--no-hooks",
        action="store_true",
        help="do not inject the automatic phase/step hooks into the command (samples only)",
    )
    parser.add_argument(
        "--profile",
        metavar="STEPS",
        nargs="?",
        type=int,
        const=PROFILE_STEPS,
        default=None,
        help=f"profile STEPS training steps (default {PROFILE_STEPS}) after the first "
        f"{PROFILE_SKIP}, no code change, and add the kernel-level findings to the report: "
        "PyTorch optimizer steps with torch.profiler; Keras train batches and TensorFlow/JAX "
        "loops' steps with the backend's own profiler; the trace is written beside the recording",
    )
    metrics.add_argument(parser)
    fail_on.add_argument(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from gpuwhy.runtime.child import resolve_command
    from gpuwhy.runtime.paths import default_recording_path

    command = job_command(args.command, "run")
    interval = float(args.interval)
    if not (math.isfinite(interval) and MIN_INTERVAL_S <= interval <= MAX_INTERVAL_S):
        raise UsageError(
            f"run: --interval {args.interval:g} is out of range",
            f"give seconds between {MIN_INTERVAL_S:g} and {MAX_INTERVAL_S:g} (default 0.1)",
        )
    if args.profile is not None and not 1 <= args.profile <= MAX_PROFILE_STEPS:
        raise UsageError(
            f"run: --profile {args.profile}: out of range",
            f"give 1 to {MAX_PROFILE_STEPS} steps (default {PROFILE_STEPS}); traces grow fast",
        )
    json_path = _checked_output_path(args.json, "--json") if args.json else None
    html_path = _checked_output_path(args.html, "--html") if args.html else None
    gate = fail_on.parse(args.fail_on, "run")
    if args.metrics:
        metrics.check_address(args.metrics)
    resolve_command(command, os.environ)  # SpawnError (127/126) before any file is created
    record = _record_path(args.record, command) if args.record else default_recording_path(command)
    try:
        return _record_and_report(args, command, record, interval, json_path, html_path, gate)
    finally:
        from gpuwhy.recording import schema

        schema.release(record)  # a name gpuwhy claimed that no recording was written into


def _record_and_report(
    args: argparse.Namespace,
    command: list[str],
    record: Path,
    interval: float,
    json_path: Path | None,
    html_path: Path | None,
    gate: fail_on.FailOn | None,
) -> int:
    from gpuwhy.cli.crash import CrashWithExitCode
    from gpuwhy.runtime.child import FinishGuard
    from gpuwhy.runtime.job import JobOptions, run_job

    stderr = sys.stderr
    if not args.quiet:
        _say(stderr, f"recording to {record}")
    if _open_to_everyone(record.parent):
        _say(
            stderr,
            f"note: {record.parent} is writable by every user of this machine: others "
            "can see the recording there",
        )
    from gpuwhy.cli.report import profile_directory

    profile_dir = profile_directory(record) if args.profile is not None else None
    options = JobOptions(
        command=command,
        record=record,
        interval_s=interval,
        hooks=not args.no_hooks,
        redact=not args.no_redact,
        profile=None if profile_dir is None else (PROFILE_SKIP, args.profile, profile_dir),
    )
    # Bound before the job starts: a taken port is a one-line error, not a job half watched.
    served = metrics.RunMetrics(args.metrics, record) if args.metrics else None
    if served is not None and not args.quiet:
        _say(stderr, f"metrics at http://{served.server.host}:{served.server.port}/metrics")
    with FinishGuard() as guard:
        try:
            result = run_job(
                options,
                environ=os.environ,
                on_started=_starter(stderr, quiet=bool(args.quiet), served=served),
                hurry=guard.event,
            )
        finally:
            if served is not None:
                served.close()
        try:
            if result.crash is not None:
                raise result.crash
            if result.spawn_error is not None:
                _say(stderr, result.spawn_error.one_line())
            for error in result.errors:
                _say(stderr, f"warning: {error}")
            diagnosis: Any | None = None
            problem: str | None = "gpuwhy was interrupted before the analysis"
            # --quiet with no report file and no gate: nothing would read an analysis.
            wanted = not args.quiet or json_path or html_path or gate is not None
            if not guard.event.is_set() and wanted:
                diagnosis, problem = _summarise(
                    record,
                    json_path,
                    html_path,
                    quiet=bool(args.quiet),
                    stream=stderr,
                    profile_dir=profile_dir,
                )
            _say(stderr, f"recording saved to {record} (see it again: gpuwhy report {record})")
            gated = fail_on.exit_code(
                gate, diagnosis, problem, stderr, job_exit_code=result.exit_code
            )
        except Exception as error:
            raise CrashWithExitCode(_exit_code_after_a_crash(result, gate)) from error
    if gated == ExitCode.INTERNAL and guard.event.is_set():
        return int(ExitCode.INTERRUPTED)  # the gate went unchecked because gpuwhy was stopped
    return result.exit_code if gated is None else gated


def _exit_code_after_a_crash(result: Any, gate: Any | None) -> int:
    """The exit code when gpuwhy failed once the command had been started (README, "Exit
    codes"): the command's own, as always; 70 only where a --fail-on gate went unchecked on a
    command that succeeded, as when the analysis fails (a gate that passes unseen would let a
    regression through)."""
    if result.exit_code == 0 and gate is not None:
        return int(ExitCode.INTERNAL)
    return int(result.exit_code)


def _starter(
    stream: TextIO, *, quiet: bool, served: metrics.RunMetrics | None
) -> Callable[[Any], Callable[[], None] | None]:
    """The `run_job` callback: the live status line on a terminal, the metrics' live data."""

    def start(session: Any) -> Callable[[], None] | None:
        from gpuwhy.report.live import LiveLine, live_enabled, state_reader

        stops = [served.attach(session)] if served is not None else []
        if live_enabled(stream, quiet=quiet):
            line = LiveLine(stream, state_reader(session), lambda: session.devices)
            line.start()
            stops.append(line.stop)

        def stop_all() -> None:
            for stop in stops:
                stop()

        return stop_all

    return start


def _with_profile(
    diagnosis: Any, recording: Any, profile_dir: Path, stream: TextIO
) -> tuple[Any, list[Any]]:
    """The run's diagnosis with its profiler window folded in, and the window's traces."""
    from gpuwhy.cli.report import window_written, with_profile_window

    if not window_written(profile_dir):
        _say(stream, "note: no profiler window was written (no training steps past the warm-up?)")
        return diagnosis, []
    folded, traces, error = with_profile_window(diagnosis, recording, profile_dir)
    if error:
        _say(stream, f"warning: the profiler window could not be read: {error}")
    return folded, traces


def _summarise(
    record: Path,
    json_path: Path | None,
    html_path: Path | None,
    *,
    quiet: bool,
    stream: TextIO,
    profile_dir: Path | None = None,
) -> tuple[Any | None, str | None]:
    """Print the report, write --json and --html; a failure here is one warning line, no more.

    Returns the Diagnosis, or (None, why) when the recording could not be analysed.
    """
    from gpuwhy.cli.report import analyse, report_workers, show, write_html, write_json
    from gpuwhy.recording.reader import Recording

    try:
        recording = Recording.open(record)
    except Exception as error:
        _say(stream, f"warning: cannot read the recording back: {error}")
        return None, f"cannot read the recording back: {error}"
    with recording, report_workers(recording) as workers:
        diagnosis, problem = analyse(recording, workers)
        traces: list[Any] = []
        if diagnosis is not None and profile_dir is not None:
            diagnosis, traces = _with_profile(diagnosis, recording, profile_dir, stream)
        if json_path is not None:
            try:
                if diagnosis is None:
                    raise RuntimeError(problem)
                write_json(diagnosis, str(json_path))
            except Exception as error:
                _say(stream, f"warning: no JSON report written to {json_path}: {error}")
        html_written = False
        if html_path is not None:
            try:
                if diagnosis is None:
                    raise RuntimeError(problem)
                write_html(diagnosis, recording, str(html_path), traces, workers)
                html_written = True
            except Exception as error:
                _say(stream, f"warning: no HTML report written to {html_path}: {error}")
        if not quiet:
            try:
                show(recording, diagnosis, problem, stream)
            except Exception as error:
                _say(stream, f"warning: no summary: {error}")
            if html_written:
                _say(stream, f"HTML report written to {html_path} (open it in a browser)")
    return diagnosis, problem


def _record_path(value: str, command: list[str]) -> Path:
    """--record FILE, or --record DIR/: a name of gpuwhy's in that folder, one per node."""
    if not (value.endswith(os.sep) or Path(value).is_dir()):
        return _checked_record_path(value)
    from gpuwhy.runtime.paths import node_recording_path

    folder = Path(value)
    if not folder.is_dir():
        raise UsageError(f"run: --record {value}: folder does not exist", "create it first")
    return node_recording_path(
        command, folder, environ=os.environ, host=socket.gethostname(), pid=os.getpid()
    )


def _checked_record_path(value: str) -> Path:
    path = _checked_output_path(value, "--record")
    if path.exists():
        raise UsageError(
            f"run: --record {value}: the file already exists",
            "gpuwhy never overwrites a recording: choose another name or remove the old one",
        )
    return path


def _checked_output_path(value: str, flag: str) -> Path:
    path = Path(value)
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"run: {flag} {value}: folder {parent} does not exist", "create it first")
    if path.is_dir():
        raise UsageError(f"run: {flag} {value} is a folder", "give a file name")
    return path


def _open_to_everyone(folder: Path) -> bool:
    """Whether every user may write into the folder (as /tmp): a shared place, said aloud."""
    try:
        return bool(folder.resolve().stat().st_mode & stat.S_IWOTH)
    except OSError:
        return False


def _say(stream: TextIO, text: str) -> None:
    try:
        stream.write(f"gpuwhy: {text}\n")
        stream.flush()
    except (OSError, ValueError):
        pass  # the terminal went away (SIGHUP): the recording is what matters
