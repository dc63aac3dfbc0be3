"""`gpuwhy watch [--once] [--interval S]`: a live view of every GPU and the reasons."""

from __future__ import annotations

import argparse
from typing import Any

from gpuwhy.cli import metrics
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
    metrics.add_argument(parser)
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from gpuwhy.telemetry.host import HostSource

    if not args.interval >= 0.1:
        raise UsageError(
            f"--interval {args.interval}: too short",
            "use at least 0.1 s (NVML refreshes its counters every 1/6 s to 1 s)",
        )
    if args.metrics and args.once:
        raise UsageError(
            "watch: --metrics with --once: nothing would stay to be scraped",
            "leave out --once to serve metrics while watching",
        )
    if args.replay:
        from gpuwhy.recording.reader import Recording
        from gpuwhy.recording.replay import ReplaySource

        recording = Recording.open(args.replay)  # RecordingError: one line, exit 2
        try:
            return _watch([ReplaySource(recording)], args)
        finally:
            recording.close()
    from gpuwhy.telemetry.nvml import NvmlSource

    nvml = NvmlSource()
    if not nvml.available():
        problem = nvml.problem
        assert problem is not None
        raise NoDeviceError(problem.message, problem.fix)
    return _watch([nvml, HostSource()], args)


def _watch(sources: list[Any], args: argparse.Namespace) -> int:
    from rich.console import Console

    from gpuwhy.report.watch import watch

    if not args.metrics:
        return watch(sources, Console(), interval_s=args.interval, once=args.once)
    publish, server = metrics.watch_metrics(args.metrics)
    try:
        return watch(sources, Console(), interval_s=args.interval, publish=publish)
    finally:
        server.close()
