"""`gpuwhy export REC --perfetto FILE`: a recording as a trace for ui.perfetto.dev."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from gpuwhy.errors import InputFileError, UsageError


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < 10**9:
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds: {text!r}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export",
        help="export a recording as a trace (Perfetto / chrome://tracing)",
        description="Write a recording as Chrome trace-event JSON: counters for every GPU and "
        "host metric, spans for phases and steps, events as instants. Open it at "
        "https://ui.perfetto.dev or chrome://tracing.",
        epilog="Long recordings: with the default --resolution auto, a window of more than "
        "about half an hour of 8 GPUs at 10 Hz gets its counters as 1-s means (up to "
        "about 3.5 h of 8 GPUs) or 1-min means (longer), from the recording's stored "
        "tiers, and more than 250,000 steps and input waits become two counters per "
        "process (steps per second, %% of time waiting for input). The trace's "
        "otherData says which. For every sample and span, export a window: e.g. "
        "--start 3600 --end 4200.",
    )
    parser.add_argument(
        "recording",
        metavar="REC",
        help="a recording (.gpuwhy.db), or a TensorFlow/JAX profile (*.xplane.pb or its log "
        "directory), which Perfetto cannot open itself",
    )
    parser.add_argument(
        "--perfetto",
        metavar="FILE",
        required=True,
        help="where to write the trace JSON ('-' for standard output)",
    )
    parser.add_argument(
        "--start",
        type=_seconds,
        metavar="S",
        default=None,
        help="export from S seconds after the run's start (default: its start)",
    )
    parser.add_argument(
        "--end",
        type=_seconds,
        metavar="S",
        default=None,
        help="export up to S seconds after the run's start (default: its end)",
    )
    parser.add_argument(
        "--resolution",
        choices=("auto", "raw", "1s", "1min"),
        default="auto",
        help="counters: every sample (raw: also every span, however many), "
        "1-s or 1-min means; auto picks by the window's size (default)",
    )
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from gpuwhy.recording.reader import Recording
    from gpuwhy.report.perfetto.trace import trace_plan, write_trace
    from gpuwhy.traces import is_trace_path

    target = str(args.perfetto)
    if is_trace_path(args.recording):
        return _export_profile(args, target)
    if target != "-" and Path(target).resolve() == Path(args.recording).resolve():
        raise UsageError(
            "the trace would overwrite the recording",
            "give --perfetto another file name, e.g. trace.json",
        )
    if args.start is not None and args.end is not None and args.end <= args.start:
        raise UsageError(
            f"--end {args.end:g} is not after --start {args.start:g}",
            "give a window that ends after it starts (seconds from the run's start)",
        )
    with Recording.open(args.recording) as recording:  # RecordingError: one line, exit 2
        plan = trace_plan(recording, args.start, args.end, args.resolution)
        if target == "-":
            write_trace(recording, sys.stdout, plan=plan)
            return 0
        count = _write_beside(target, lambda out: write_trace(recording, out, plan=plan))
    print(
        f"wrote {target}: {count:,} trace events — open it at https://ui.perfetto.dev "
        "or chrome://tracing"
    )
    if plan.counter_width_ns or not plan.every_span:
        held = plan.describe()
        print(
            f"  counters: {held['counters']}; spans: {held['spans']}.\n"
            f"  For full detail, {held['full_detail']}."
        )
    return 0


def _write_beside(target: str, write: Callable[[TextIO], int]) -> int:
    """Run ``write`` into a file beside ``target``, then rename it: a failed export never
    leaves half a file. Returns what ``write`` returned (the events written)."""
    folder = Path(target).resolve().parent
    try:
        handle, temp = tempfile.mkstemp(prefix=".gpuwhy-trace-", dir=folder)
    except OSError as error:
        raise InputFileError(
            f"cannot write {target}: {error.strerror}",
            "check that the folder exists and is writable",
        ) from error
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            count = write(out)
        os.replace(temp, target)
    except OSError as error:
        Path(temp).unlink(missing_ok=True)
        raise InputFileError(
            f"cannot write {target}: {error.strerror or error}",
            "check free disk space and the path",
        ) from error
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return count


def _export_profile(args: argparse.Namespace, target: str) -> int:
    """A TensorFlow/JAX profile as a Chrome trace; a Kineto trace is one already."""
    from gpuwhy.report.perfetto.from_trace import write_profile_trace
    from gpuwhy.traces import load_traces

    if args.start is not None or args.end is not None or args.resolution != "auto":
        raise UsageError(
            "--start, --end and --resolution apply to recordings only",
            "export the whole profile: gpuwhy export PROFILE --perfetto FILE",
        )
    traces = load_traces(args.recording)  # TraceError: one line, exit 2
    if all(trace.format == "kineto" for trace in traces):
        raise UsageError(
            f"{args.recording} is a Chrome trace already",
            "open it as it is at https://ui.perfetto.dev (or in TensorBoard)",
        )
    if target == "-":
        write_profile_trace(traces, sys.stdout)
        return 0
    count = _write_beside(target, lambda out: write_profile_trace(traces, out))
    print(f"wrote {target}: {count:,} trace events — open it at https://ui.perfetto.dev")
    return 0
