"""What watching a job costs: the sampler's CPU time per tick and its share of one core.

Runs the real Sampler at 10 Hz and 100 Hz with the host source following a real job (a parent
with four idle worker processes, like a data loader) — as configured by default (the host read
at most every 0.5 s) and read on every tick — and with NVML too where a GPU answers.
The sampler thread measures its own CPU time (thread_time) around every tick; the share of one
core is that CPU time over the wall time of the run. Writes bench/results/sampler_cost.md.

    python bench/sampler_cost.py [--seconds 20] [--out bench/results/sampler_cost.md]
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import machine
import psutil

from gpuwhy.model import Record
from gpuwhy.telemetry.host import HostSource
from gpuwhy.telemetry.job import JobTracker
from gpuwhy.telemetry.nvml import NvmlSource
from gpuwhy.telemetry.sampler import Sampler
from gpuwhy.telemetry.source import Source

JOB = (
    "import subprocess, sys, time\n"
    "workers = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'])"
    " for _ in range(4)]\n"
    "time.sleep(3600)\n"
)


def measure(sources: list[Source], rate_hz: float, seconds: float) -> dict[str, float]:
    records = 0

    def sink(record: Record) -> None:
        nonlocal records
        records += 1

    sampler = Sampler(sources, sink, interval_s=1 / rate_hz)
    sampler.start()
    started = time.monotonic_ns()
    process_cpu = time.process_time_ns()
    time.sleep(seconds)
    wall_ns = time.monotonic_ns() - started
    # The whole process: the sampler thread plus helpers (NVML's slow lane); this thread sleeps.
    process_cpu = time.process_time_ns() - process_cpu
    stats = sampler.stats
    sampler.stop()
    return {
        "ticks": stats.ticks,
        "cpu_us_per_tick": stats.cpu_per_tick_ns / 1e3,
        "wall_us_per_tick": stats.busy_ns / max(stats.ticks, 1) / 1e3,
        "cpu_share_pct": 100 * stats.cpu_ns / wall_ns,
        "process_share_pct": 100 * process_cpu / wall_ns,
        "late_ticks": stats.late_ticks,
        "records": records,
        "degraded": len(sampler.degraded),
    }


def nvml_call_costs(tracker: JobTracker, seconds: float) -> list[tuple[str, float, float, float]]:
    """Each NVML function the NVML source calls while sampling at 10 Hz (slow lane included):
    (name, calls per second, mean wall µs, mean CPU µs of the calling thread). The module's
    functions are wrapped for the run, so each is timed where the source really calls it."""
    import pynvml

    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])

    def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
            try:
                return function(*args, **kwargs)
            finally:
                entry = totals[name]
                entry[0] += 1
                entry[1] += time.perf_counter_ns() - wall
                entry[2] += time.thread_time_ns() - cpu

        return call

    originals = {
        name: getattr(pynvml, name)
        for name in dir(pynvml)
        if name.startswith("nvml") and callable(getattr(pynvml, name))
    }
    for name, function in originals.items():
        setattr(pynvml, name, timed(name, function))
    try:
        measure([NvmlSource(tracker)], 10.0, seconds)
    finally:
        for name, function in originals.items():
            setattr(pynvml, name, function)
    skip = {"nvmlInit", "nvmlInitWithFlags", "nvmlShutdown"}  # once per run, not per tick
    rows = [
        (name, n / seconds, wall / n / 1e3, cpu / n / 1e3)
        for name, (n, wall, cpu) in totals.items()
        if n and name not in skip
    ]
    return sorted(rows, key=lambda row: -row[1] * row[3])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "sampler_cost.md"))
    args = parser.parse_args(argv)
    job = subprocess.Popen([sys.executable, "-c", JOB])
    try:
        time.sleep(1.0)  # let the workers start
        tracker = JobTracker(job.pid)
        processes = len(tracker.pids())
        nvml = NvmlSource(tracker)
        gpu = nvml.available()
        gpus = len(nvml.open()) if gpu else 0  # available() asks NVML, open() lists the GPUs
        configurations: list[tuple[str, Callable[[], list[Source]]]] = [
            ("host (default, every 0.5 s)", lambda: [HostSource(tracker)]),
            ("host, every tick", lambda: [HostSource(tracker, interval_s=0)]),
        ]
        if gpu:
            nvml.close()
            configurations.append(("NVML", lambda: [NvmlSource(tracker)]))
            configurations.append(
                ("host (default) + NVML", lambda: [HostSource(tracker), NvmlSource(tracker)])
            )
        rows = []
        for label, make in configurations:
            for rate in (10.0, 100.0):
                result = measure(make(), rate, args.seconds)
                rows.append((label, rate, result))
                print(
                    f"{label:28} {rate:5.0f} Hz  {result['cpu_us_per_tick']:8.1f} µs CPU/tick"
                    f"  {result['cpu_share_pct']:6.3f} % of a core  "
                    f"({result['ticks']:.0f} ticks, {result['late_ticks']:.0f} late)"
                )
        calls = nvml_call_costs(tracker, args.seconds) if gpu else []
        for name, per_s, wall_us, cpu_us in calls:
            print(f"{name:44} {per_s:6.1f}/s  {wall_us:9.1f} µs wall  {cpu_us:9.1f} µs CPU")
    finally:
        for child in psutil.Process(job.pid).children(recursive=True):
            child.kill()
        job.kill()
        job.wait()
    gpu_note = (
        f"NVML: {gpus} GPU(s), slow lane (PCIe, processes) every 1 s"
        if gpu
        else f"NVML not measured: {nvml.unavailable_reason}"
    )
    lines = [
        "# Sampler cost",
        "",
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC} with "
        f"`python bench/sampler_cost.py --seconds {args.seconds:g}`.",
        "",
        f"- Machine: {machine.describe()}",
        f"- Job followed: a real process tree of {processes} processes (a parent and four idle "
        "workers).",
        f"- {gpu_note}",
        "- CPU per tick: the sampler thread's own CPU time (`time.thread_time_ns`) per tick, "
        "mean over the run; share of one core: that CPU time over the run's wall time.",
        "- Process share: all CPU of the measuring process over the run (sampler thread plus "
        "helper threads such as NVML's slow lane for PCIe and process lists, and the timed "
        "waits between ticks).",
        "",
        "| sources | rate | ticks | CPU per tick | wall per tick | CPU share of one core "
        "| process share | late ticks |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, rate, r in rows:
        lines.append(
            f"| {label} | {rate:.0f} Hz | {r['ticks']:.0f} | "
            f"{r['cpu_us_per_tick']:.1f} µs | {r['wall_us_per_tick']:.1f} µs | "
            f"{r['cpu_share_pct']:.3f} % | {r['process_share_pct']:.3f} % | "
            f"{r['late_ticks']:.0f} |"
        )
    lines += [
        "",
        "Late ticks: deadlines skipped because a tick ran past the next one "
        "(the machine was busy); the period itself does not drift.",
        "",
    ]
    if calls:
        lines += [
            "## NVML calls at 10 Hz",
            "",
            "Each NVML function the source called, timed where it was called (the tick or the "
            "slow lane), most CPU per second first.",
            "",
            "| function | calls per second | wall per call | CPU per call |",
            "|---|---|---|---|",
            *(
                f"| `{name}` | {per_s:.1f} | {wall_us:.1f} µs | {cpu_us:.1f} µs |"
                for name, per_s, wall_us, cpu_us in calls
            ),
            "",
        ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
