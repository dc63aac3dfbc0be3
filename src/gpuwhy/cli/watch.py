"""`gpuwhy watch [--once] [--interval S]`: a live view of every GPU and the reasons."""

from __future__ import annotations

import argparse
from typing import Any

from gpuwhy.errors import NoDeviceError, UsageError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "watch",
        help="live view of every GPU: utilization, memory, power, clocks, reasons",
        description="A live view of every NVIDIA GPU: utilization with a short history, SM "
        "activity (Hopper and newer), memory, power, clocks and why they are held "
        "down, PCIe link and traffic, and the processes on each GPU. Ctrl-C ends it.",
    )
    parser.add_argument("--once", action="store_true", help="print one snapshot and exit")
    parser.add_argument(
        "--interval",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between refreshes (default 1.0, at least 0.1)",
    )
    parser.add_argument(
        "--replay", metavar="REC", help="show a recording instead of this machine's GPUs"
    )
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from rich.console import Console

    from gpuwhy.report.watch import watch
    from gpuwhy.telemetry.host import HostSource

    if not args.interval >= 0.1:
        raise UsageError(
            f"--interval {args.interval}: too short",
            "use at least 0.1 s (NVML refreshes its counters every 1/6 s to 1 s)",
        )
    if args.replay:
        from gpuwhy.recording.reader import Recording
        from gpuwhy.recording.replay import ReplaySource

        recording = Recording.open(args.replay)  # RecordingError: one line, exit 2
        try:
            return watch(
                [ReplaySource(recording)], Console(), interval_s=args.interval, once=args.once
            )
        finally:
            recording.close()
    from gpuwhy.telemetry.nvml import NvmlSource

    nvml = NvmlSource()
    if not nvml.available():
        problem = nvml.problem
        assert problem is not None
        raise NoDeviceError(problem.message, problem.fix)
    return watch([nvml, HostSource()], Console(), interval_s=args.interval, once=args.once)
