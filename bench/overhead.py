"""Overhead of `gpuwhy run`: healthy Keras (TF) and PyTorch jobs under gpuwhy vs bare, alternated.

Each pair runs the job bare and under `gpuwhy run --quiet` back to back, alternating which goes
first so that drifts in machine load hit both alike. Reported: the median over pairs of the ratio
(under gpuwhy / bare) of the end-to-end wall time — what the user waits — and of the job's own
`fit` time, which isolates the cost inside the job (hooks, sampler, the environment probe running
beside it) from gpuwhy's start-up and wrap-up. `--quiet` runs make no analysis (nothing would
show it); what the summary of a default run adds is timed apart and reported beside. Results go
to bench/results/overhead.md with the machine and date.

Each median ratio comes with a 95 % bootstrap interval (pairs resampled): on a shared machine
single runs of the same job vary by 10-20 %, so the interval says how far the median can be
trusted. gpuwhy's own CPU seconds (its process up to the job's end, and the environment probe:
`gpuwhy_cost` in the recording) are reported beside, as they hardly vary. gpuwhy's bytecode is
compiled first, as an installed wheel has it, so no run pays for compiling gpuwhy's sources.

    python bench/overhead.py [--pairs 8] [--batches 120] [--epochs 3] [--jobs keras torch]
"""

from __future__ import annotations

import argparse
import compileall
import datetime as dt
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import machine

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
JOBS = {
    "keras": (HERE / "keras_healthy_job.py", "Keras on TensorFlow, `fit`, compute-bound, CPU"),
    "torch": (HERE / "torch_healthy_job.py", "PyTorch loop over a DataLoader, compute-bound, CPU"),
}
TARGET = 1.03


def from_recording(record: Path) -> tuple[float, float, float]:
    """(how long the job ran under gpuwhy, gpuwhy's process CPU s, the probe's CPU s)."""
    from gpuwhy.recording import Recording

    with Recording.open(record) as recording:
        cost = recording.meta.get("gpuwhy_cost") or {}
        start, end = recording.run_bounds() or (0, 0)
        return (
            (end - start) / 1e9,
            float(cost.get("recorder_cpu_s") or "nan"),
            float(cost.get("probe_cpu_s") or "nan"),
        )


def compile_gpuwhy() -> None:
    """Byte-compile gpuwhy where it is imported from (a source checkout has no .pyc files, and
    PYTHONDONTWRITEBYTECODE=1 keeps Python from writing them)."""
    import gpuwhy

    compileall.compile_dir(str(Path(gpuwhy.__file__).parent), quiet=1)


def median_interval(values: list[float], rounds: int = 2000) -> tuple[float, float]:
    """95 % bootstrap interval of the median of ``values`` (seeded: the same data, the same
    interval)."""
    draw = random.Random(0)
    medians = sorted(statistics.median(draw.choices(values, k=len(values))) for _ in range(rounds))
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds) - 1]


def children_cpu_s() -> float:
    """CPU seconds (user + system) of every finished child process of this one, so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(command: list[str]) -> tuple[float, float, float]:
    """(wall s, the job's fit s, CPU s of the run and everything it started); raises if it fails.

    CPU time is what gpuwhy costs the machine, and unlike wall time it hardly moves when other
    processes compete for the cores: the steadier measure on a shared machine.
    """
    start, cpu = time.monotonic(), children_cpu_s()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    wall, cpu = time.monotonic() - start, children_cpu_s() - cpu
    if done.returncode != 0:
        joined = " ".join(command)
        raise SystemExit(f"run failed ({done.returncode}): {joined}\n{done.stderr[-2000:]}")
    found = re.search(r"fit_s=([0-9.]+)", done.stdout)
    if found is None:
        raise SystemExit(f"the job printed no fit time: {done.stdout[-500:]}")
    return wall, float(found.group(1)), cpu


def measure(job: list[str], pairs: int, scratch: str) -> tuple[list[dict[str, Any]], list[float]]:
    """Per pair: {"bare": (wall, fit, CPU), "gpuwhy": (...), "own": (process CPU, probe CPU)};
    and gpuwhy's time outside the job."""
    rows: list[dict[str, Any]] = []
    outside: list[float] = []  # seconds of each gpuwhy run not spent in the job itself
    for pair in range(pairs):
        record = Path(scratch, f"run{pair}-{Path(job[1]).stem}.gpuwhy.db")
        under = [
            sys.executable,
            "-m",
            "gpuwhy",
            "run",
            "--quiet",
            "--record",
            str(record),
            "--",
            *job,
        ]
        order = ("bare", "gpuwhy") if pair % 2 == 0 else ("gpuwhy", "bare")
        result = {}
        for which in order:
            result[which] = _run(job if which == "bare" else under)
        child_s, recorder_cpu_s, probe_cpu_s = from_recording(record)
        outside.append(result["gpuwhy"][0] - child_s)
        result["own"] = (recorder_cpu_s, probe_cpu_s)
        rows.append(result)
        print(
            f"{Path(job[1]).stem} pair {pair + 1}/{pairs}: bare {result['bare'][0]:.2f} s "
            f"(fit {result['bare'][1]:.2f}, CPU {result['bare'][2]:.2f}), gpuwhy "
            f"{result['gpuwhy'][0]:.2f} s (fit {result['gpuwhy'][1]:.2f}, CPU "
            f"{result['gpuwhy'][2]:.2f})",
            flush=True,
        )
    return rows, outside


def report_s(record: Path, runs: int = 5) -> float:
    """Median wall seconds of `gpuwhy report RECORD`: what the summary printed at the end of a
    `gpuwhy run` without `--quiet` costs (its analysis, rendering and start-up)."""
    times = []
    for _ in range(runs):
        start = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "gpuwhy", "report", str(record)],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        times.append(time.monotonic() - start)
    return statistics.median(times)


def section(
    name: str, command: str, rows: list[dict[str, Any]], outside: list[float], summary_s: float
) -> list[str]:
    """The results of one job: the median ratios with their intervals, then every pair."""
    measures = (
        "end-to-end wall time",
        "the job's own training time",
        "CPU time of the run and all it started",
    )
    table, summary = [], []
    for column, label in enumerate(measures):
        ratios = [r["gpuwhy"][column] / r["bare"][column] for r in rows]
        median, (low, high) = statistics.median(ratios), median_interval(ratios)
        target = f"≤ {TARGET}" if column == 0 else ""
        table.append(f"| {label} | {median:.3f} | {low:.3f} – {high:.3f} | {target} |")
        summary.append(f"{label} {median:.3f} [{low:.3f}, {high:.3f}]")
    outside_s = statistics.median(outside)
    bare_s = statistics.median(r["bare"][0] for r in rows)
    recorder_cpu_s = statistics.median(r["own"][0] for r in rows)
    probe_cpu_s = statistics.median(r["own"][1] for r in rows)
    gpuwhy_wall_s = statistics.median(r["gpuwhy"][0] for r in rows)
    print(f"{name}: {'; '.join(summary)}; outside the job {outside_s:.2f} s")
    lines = [
        f"## {name}: `{command}`",
        "",
        f"Job: {JOBS[name][1]}.",
        "",
        "| measure | median ratio (gpuwhy / bare) | 95 % interval | target |",
        "|---|---|---|---|",
        *table,
        "",
        f"- gpuwhy's own time outside the job (its start-up before the child, the recording "
        f"closed after it; median): {outside_s:.2f} s, "
        f"{outside_s / bare_s:.1%} of the bare run's median wall time.",
        f"- gpuwhy's own CPU up to the job's end (median): its process {recorder_cpu_s:.2f} s "
        f"(start-up, sampling, listening, writing), the environment probe {probe_cpu_s:.2f} s; "
        f"together {(recorder_cpu_s + probe_cpu_s) / gpuwhy_wall_s:.1%} of one core over the "
        "run.",
        f"- `--quiet` prints no summary, so these runs make no analysis. Without it, `gpuwhy run` "
        f"analyses the recording and prints the report after the job: {summary_s:.2f} s more "
        f"(`gpuwhy report` of one of these recordings, median of 5), {summary_s / bare_s:.1%} "
        "of the bare run.",
        "",
        "| pair | bare wall s | gpuwhy wall s | bare fit s | gpuwhy fit s | bare CPU s | "
        "gpuwhy CPU s |",
        "|---|---|---|---|---|---|---|",
    ]
    for number, r in enumerate(rows, 1):
        lines.append(
            f"| {number} | {r['bare'][0]:.2f} | {r['gpuwhy'][0]:.2f} | "
            f"{r['bare'][1]:.2f} | {r['gpuwhy'][1]:.2f} | {r['bare'][2]:.2f} | "
            f"{r['gpuwhy'][2]:.2f} |"
        )
    return [*lines, ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--batches", type=int, default=120)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--jobs", nargs="+", choices=sorted(JOBS), default=["keras", "torch"])
    parser.add_argument("--out", type=Path, default=HERE / "results" / "overhead.md")
    args = parser.parse_args()
    compile_gpuwhy()
    load_before = os.getloadavg()
    sections: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.jobs:
            script = JOBS[name][0]
            job = [
                sys.executable,
                str(script),
                "--batches",
                str(args.batches),
                "--epochs",
                str(args.epochs),
            ]
            rows, outside = measure(job, args.pairs, scratch)
            command = f"bench/{script.name} --batches {args.batches} --epochs {args.epochs}"
            summary_s = report_s(Path(scratch, f"run0-{script.stem}.gpuwhy.db"))
            sections += section(name, command, rows, outside, summary_s)
    lines = [
        "# Overhead of `gpuwhy run`",
        "",
        f"- Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {machine.describe()}",
        f"- Method: `python bench/overhead.py --pairs {args.pairs}`: per job, {args.pairs} pairs, "
        "bare and `gpuwhy run --quiet` alternated (ABAB…, order swapped every pair); median "
        "over pairs of the per-pair ratio, with a 95 % bootstrap interval (2000 resamples of the "
        "pairs). gpuwhy's bytecode compiled first, as an installed wheel has it.",
        f"- Load average (1 min) before / after: {load_before[0]:.2f} / {os.getloadavg()[0]:.2f} "
        "(other processes on the machine add noise to single pairs; the median resists it).",
        "",
        *sections,
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines).rstrip("\n") + "\n", encoding="utf-8")
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
