"""`gpuwhy report REC [--json] [--html FILE]`: analyse a recording again and show the report.

The same steps end `gpuwhy run`: `summarise` is shared. Whatever fails in the analysis or the
rendering, a minimal summary computed straight from the recording is shown instead, so a run's
result is never lost to a report bug.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from gpuwhy.cli import fail_on
from gpuwhy.errors import ExitCode, InputFileError, UsageError
from gpuwhy.runtime.paths import SUFFIX


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="analyse a recording again and show the report",
        description="Re-analyse a recording made by 'gpuwhy run' or gpuwhy.monitor(), or "
        "diagnose a profiler trace the job already wrote (kernel-level findings).",
        epilog="exit codes: 0 report shown; 1 it holds an error finding (the GPU could not be "
        "used); 2 the file is missing, truncated or not a recording or trace; with --fail-on, "
        "the listed findings alone decide: 4 if one of them appears, else 0",
    )
    parser.add_argument(
        "recording",
        metavar="REC",
        nargs="+",
        help="a .gpuwhy.db recording; several, or a folder of them (one per node of a job: "
        "one report, the nodes' clocks aligned); a PyTorch profiler trace "
        "(*.pt.trace.json[.gz]) or a directory of them (one per rank); a TensorFlow/JAX "
        "profile (*.xplane.pb, or its TensorBoard log directory)",
    )
    parser.add_argument(
        "--json", action="store_true", help="write the report as JSON to stdout instead"
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also write the report as one self-contained HTML page (timeline included) to FILE",
    )
    fail_on.add_argument(parser)
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from gpuwhy.recording.reader import Recording
    from gpuwhy.traces import is_trace_path

    gate = fail_on.parse(args.fail_on, "report")
    nodes = _node_recordings(args.recording)
    if nodes is not None:
        return _handle_nodes(nodes, args, gate)
    args.recording = args.recording[0]
    if is_trace_path(args.recording):
        return _handle_trace(args, gate)
    with Recording.open(args.recording) as recording:  # RecordingError: one line, exit 2
        return _report(recording, args, gate)


def _node_recordings(paths: list[str]) -> list[Path] | None:
    """The recordings of a job's nodes (several files, or a folder holding recordings); None
    for one recording or trace. UsageError when a name is neither."""
    if len(paths) == 1 and not Path(paths[0]).is_dir():
        return None
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            inside = sorted(path.glob(f"*{SUFFIX}"))
            if not inside and len(paths) == 1:
                return None  # a trace directory, perhaps: read as before
            if not inside:
                raise UsageError(f"report: {name} holds no recording", f"give *{SUFFIX} files")
            found.extend(inside)
        elif path.exists():
            found.append(path)
        else:
            raise UsageError(f"report: {name}: no such file", "check the path")
    return found


def _handle_nodes(paths: list[Path], args: argparse.Namespace, gate: Any) -> int:
    """Several nodes' recordings of one job: one report, on the first node's clock."""
    from gpuwhy.recording.merged import MergedRecording
    from gpuwhy.recording.reader import Recording

    if args.html:
        raise UsageError(
            "report: --html of several recordings is not available",
            "write --json, or give one node's recording for its page",
        )
    opened: list[Recording] = []
    try:
        for path in paths:
            opened.append(Recording.open(path))  # RecordingError: one line, exit 2
        args.recording = ", ".join(str(path) for path in paths)
        return _report(MergedRecording(opened), args, gate)
    finally:
        for recording in opened:
            recording.close()


def profile_directory(record: Path) -> Path:
    """Where `run --profile` writes its traces: beside the recording, named after it."""
    return record.parent / (record.name.removesuffix(".db") + ".profile")


def window_written(profile_dir: Path) -> bool:
    """Whether `run --profile` closed a window there (its folder holds a trace)."""
    return profile_dir.is_dir() and any(profile_dir.iterdir())


def with_profile_window(
    diagnosis: Any, recording: Any, profile_dir: Path
) -> tuple[Any, list[Any], str | None]:
    """The diagnosis with the run's profiler window folded in, the window's traces, and why it
    could not be read (the diagnosis then as it was, no traces)."""
    from gpuwhy.analysis.kernels.copy_rate import link_bytes_per_s
    from gpuwhy.analysis.kernels.window import window_cost, with_profile
    from gpuwhy.model import SpanKind
    from gpuwhy.traces import load_traces

    try:
        traces = load_traces(str(profile_dir))
        link = link_bytes_per_s(recording.devices)  # a trace alone does not know its link
        for trace in traces:
            trace.link_bytes_per_s = link
        cost = window_cost(recording.events(), recording.spans(SpanKind.STEP))
        return with_profile(diagnosis, traces, cost), traces, None
    except Exception as error:
        return diagnosis, [], str(error)


def _report(recording: Any, args: argparse.Namespace, gate: Any) -> int:
    """Analyse `recording` (one, or a job's nodes merged) and show or write the report. One
    recording made with `run --profile` gets its profiler window too."""
    with report_workers(recording) as workers:
        diagnosis, problem = analyse(recording, workers)
        traces: list[Any] = []
        window = profile_directory(Path(args.recording))
        if diagnosis is not None and window_written(window):
            diagnosis, traces, error = with_profile_window(diagnosis, recording, window)
            if error:
                sys.stderr.write(
                    f"gpuwhy: warning: the profiler window could not be read: {error}\n"
                )
        if args.html:
            if diagnosis is None:
                raise _Unanalysable(f"cannot analyse {args.recording}: {problem}")
            # UsageError when not writable
            write_html(diagnosis, recording, args.html, traces, workers)
    if args.json:
        if diagnosis is None:
            raise _Unanalysable(f"cannot analyse {args.recording}: {problem}")
        document = _json_document(diagnosis)
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        show(recording, diagnosis, problem, sys.stdout)
    if gate is not None:
        sys.stdout.flush()  # the report first, then the gate's line on stderr
        return fail_on.exit_code(gate, diagnosis, problem, sys.stderr) or int(ExitCode.OK)
    return _exit_code(diagnosis)


def _handle_trace(args: argparse.Namespace, gate: Any) -> int:
    """A profiler trace (or a directory of them): the same report, measured from kernels."""
    from gpuwhy.analysis.kernels.diagnosis import diagnose_traces
    from gpuwhy.traces import load_traces

    traces = load_traces(args.recording)  # TraceError: one line, exit 2
    diagnosis = diagnose_traces(traces)
    if args.html:
        from gpuwhy.report.html.trace_page import write_trace_html

        write_trace_html(diagnosis, args.html, traces)  # UsageError when it cannot be written
    if args.json:
        json.dump(_json_document(diagnosis), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        from gpuwhy.report.terminal import make_console, render

        render(diagnosis, make_console(sys.stdout))
    if gate is not None:
        sys.stdout.flush()
        return fail_on.exit_code(gate, diagnosis, None, sys.stderr) or int(ExitCode.OK)
    return _exit_code(diagnosis)


class _Unanalysable(InputFileError):
    exit_code = ExitCode.INTERNAL


@contextlib.contextmanager
def report_workers(recording: Any) -> Iterator[Any]:
    """Worker processes for the report of a long recording (analysis/workers.py: none for a
    short one), stopped when the report is done or interrupted."""
    from gpuwhy.analysis.workers import Workers, worker_count

    workers = Workers(worker_count(recording))
    try:
        yield workers
    finally:
        workers.close()


def analyse(recording: Any, workers: Any = None) -> tuple[Any | None, str | None]:
    """The Diagnosis of ``recording``, or (None, one-line reason) if the analysis failed;
    ``workers`` (`report_workers`) help with a long one."""
    try:
        from gpuwhy.analysis import diagnose

        environment = recording.meta.get("environment")
        return diagnose(recording, environment=environment, workers=workers), None
    except Exception as error:  # a report bug must never cost the run's summary
        return None, f"{type(error).__name__}: {error}"


def show(recording: Any, diagnosis: Any | None, problem: str | None, stream: TextIO) -> None:
    """Render the full report on ``stream``; the minimal summary if that is not possible."""
    if diagnosis is not None:
        try:
            from gpuwhy.report.terminal import make_console, render

            render(diagnosis, make_console(stream))
            return
        except Exception as error:
            problem = f"{type(error).__name__}: {error}"
    show_minimal(recording, stream, problem)


def show_minimal(recording: Any, stream: TextIO, problem: str | None) -> None:
    """The summary any recording can give (duration, GPU utilization, steps)."""
    from gpuwhy.report.summary import basic_summary, format_basic_summary

    lines = format_basic_summary(basic_summary(recording))
    if problem:
        lines.append(f"  (full analysis unavailable: {problem[:200]})")
    stream.write("\n".join(lines) + "\n")
    stream.flush()


def write_json(diagnosis: Any, path: str) -> None:
    """Write the report contract for ``diagnosis`` to ``path``."""
    document = _json_document(diagnosis)
    with open(path, "w", encoding="utf-8") as file:
        json.dump(document, file, indent=2)
        file.write("\n")


def write_html(
    diagnosis: Any, recording: Any, path: str, traces: Sequence[Any] = (), workers: Any = None
) -> None:
    """Write the self-contained HTML report (timeline from ``recording``; ``traces``: the run's
    profiler window, whose kernels it draws too) to ``path``; ``workers`` (`report_workers`)
    draw a long recording's GPU lanes."""
    from gpuwhy.report.html.page import write_html as write_page

    write_page(diagnosis, recording, path, traces, workers)


def _json_document(diagnosis: Any) -> dict[str, Any]:
    from gpuwhy.report.json_report import to_dict

    document: dict[str, Any] = to_dict(diagnosis)
    return document


def _exit_code(diagnosis: Any | None) -> int:
    """1 when the report holds an error-severity finding (the GPU cannot be used), else 0."""
    findings = getattr(diagnosis, "findings", None) or []
    from gpuwhy.model import Severity

    if any(getattr(finding, "severity", None) is Severity.ERROR for finding in findings):
        return int(ExitCode.PROBLEMS)
    return int(ExitCode.OK)
