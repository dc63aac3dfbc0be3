"""`gpuwhy export REC --perfetto FILE`: a recording as a trace for ui.perfetto.dev."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from gpuwhy.errors import InputFileError, UsageError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export", help="export a recording as a trace (Perfetto / chrome://tracing)",
        description="Write a recording as Chrome trace-event JSON: counters for every GPU and "
                    "host metric, spans for phases and steps, events as instants. Open it at "
                    "https://ui.perfetto.dev or chrome://tracing.")
    parser.add_argument("recording", metavar="REC", help="a recording (.gpuwhy.db)")
    parser.add_argument("--perfetto", metavar="FILE", required=True,
                        help="where to write the trace JSON ('-' for standard output)")
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from gpuwhy.recording.reader import Recording
    from gpuwhy.report.perfetto import write_trace

    target = str(args.perfetto)
    if target != "-" and Path(target).resolve() == Path(args.recording).resolve():
        raise UsageError("the trace would overwrite the recording",
                         "give --perfetto another file name, e.g. trace.json")
    with Recording.open(args.recording) as recording:  # RecordingError: one line, exit 2
        if target == "-":
            write_trace(recording, sys.stdout)
            return 0
        folder = Path(target).resolve().parent
        try:
            # Written beside the target and renamed: a failed export never leaves half a file.
            handle, temp = tempfile.mkstemp(prefix=".gpuwhy-trace-", dir=folder)
        except OSError as error:
            raise InputFileError(f"cannot write {target}: {error.strerror}",
                                 "check that the folder exists and is writable") from error
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                count = write_trace(recording, out)
            os.replace(temp, target)
        except OSError as error:
            Path(temp).unlink(missing_ok=True)
            raise InputFileError(f"cannot write {target}: {error.strerror or error}",
                                 "check free disk space and the path") from error
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
    print(f"wrote {target}: {count:,} trace events — open it at https://ui.perfetto.dev "
          "or chrome://tracing")
    return 0
