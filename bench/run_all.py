"""Run every benchmark and regenerate docs/performance.md with the machine and the date.

Each benchmark is a script of its own that writes its table to bench/results/<name>.md; this
runs them one after another (never two at once: they measure time) and assembles the results,
with the machine they ran on, into docs/performance.md. A benchmark that fails or is missing is
reported as such in the document; the others still run.

    python bench/run_all.py [--quick] [--only NAME ...] [--skip NAME ...]

--quick runs shorter versions (fewer rounds, a 2 h synthetic run instead of 24 h) for a check
that everything works; the full run takes about 40 minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import machine

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
DOC = ROOT / "docs" / "performance.md"


@dataclass(frozen=True)
class Bench:
    name: str
    script: str
    full: tuple[str, ...]
    quick: tuple[str, ...]
    what: str


BENCHES = (
    Bench(
        "sampler_cost",
        "sampler_cost.py",
        ("--seconds", "20"),
        ("--seconds", "5"),
        "Sampler cost: CPU per tick and share of one core at 10 and 100 Hz",
    ),
    Bench(
        "recording_io",
        "recording_io.py",
        ("--samples", "1000000"),
        ("--samples", "200000"),
        "Recording size and speed",
    ),
    Bench(
        "scale",
        "scale.py",
        ("--hours", "24"),
        ("--hours", "2", "--writer-hours", "0.25"),
        "Scale: a synthetic day on eight GPUs",
    ),
    Bench(
        "overhead",
        "overhead.py",
        (),
        ("--pairs", "2", "--epochs", "2"),
        "Overhead of `gpuwhy run` on training throughput",
    ),
    Bench(
        "zoo_overhead",
        "zoo_overhead.py",
        (),
        ("--pairs", "1", "-k", "PyTorch MNIST example (train"),
        "Overhead of `gpuwhy run` on the zoo's real-world jobs",
    ),
    Bench(
        "boot_cost",
        "boot_cost.py",
        (),
        ("--pairs", "1", "--frameworks", "torch"),
        "gpuwhy's cost at a job's start-up",
    ),
    Bench(
        "hook_cost",
        "hook_cost.py",
        (),
        ("--quick",),
        "Cost of the hooks per call and per step on short-step jobs",
    ),
    Bench(
        "hook_ablation",
        "hook_ablation.py",
        (),
        ("--quick",),
        "Where a Keras-on-JAX step's hook cost lies: each per-step hook switched off in turn",
    ),
    Bench(
        "hook_instructions",
        "hook_instructions.py",
        ("--jobs", "torch", "keras", "--repeat", "2"),
        ("--repeat", "1", "--steps", "20", "220"),
        "The hooks' cost in instructions per step (valgrind)",
    ),
    Bench(
        "profile_call_cost",
        "profile_call_cost.py",
        (),
        ("--blocks", "4", "--repeat", "1"),
        "A profile function's call among a step's work (the legacy generator watch)",
    ),
    Bench(
        "profiler_overhead",
        "profiler_overhead.py",
        ("--rounds", "4"),
        ("--rounds", "1", "--epochs", "2"),
        "gpuwhy run beside TensorBoard's and TensorFlow's profilers",
    ),
    Bench(
        "first_verdict", "first_verdict.py", (), (), "Time to first verdict on an input-bound job"
    ),
    Bench(
        "nodes_scale",
        "nodes_scale.py",
        ("--nodes", "64"),
        ("--nodes", "4", "--hours", "0.1", "--repeat", "1"),
        "Many nodes: one report for a job's node recordings",
    ),
    Bench(
        "metrics_cost",
        "metrics_cost.py",
        (),
        ("--hours", "0.1", "--repeat", "1", "--scrapes", "20"),
        "What --metrics costs",
    ),
    Bench(
        "steady_truth",
        "steady_truth.py",
        ("--rounds", "7"),
        ("--rounds", "1", "--members", "fit-map-3", "torch-loader0-3"),  # the docs stay as they are
        "Data-wait share and phase speed-up against truth, loop by loop",
    ),
    Bench(
        "gpu_capture",
        "gpu_replay.py",
        (),
        (),
        "On a real GPU: the committed capture replayed against its measured truth",
    ),
)


def _demoted(text: str) -> str:
    """A result file's markdown with its headings one level down, title dropped."""
    lines = text.strip().splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return "\n".join(f"#{line}" if line.startswith("#") else line for line in lines).strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs, to check the suite")
    parser.add_argument("--only", nargs="*", default=None, metavar="NAME")
    parser.add_argument("--skip", nargs="*", default=[], metavar="NAME")
    parser.add_argument("--out", type=Path, default=DOC)
    args = parser.parse_args(argv)
    names = {b.name for b in BENCHES}
    unknown = (set(args.only or []) | set(args.skip)) - names
    if unknown:
        parser.error(
            f"unknown benchmark(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(b.name for b in BENCHES)}"
        )
    started = datetime.datetime.now(datetime.timezone.utc)
    machine_desc = machine.lines()  # the load average before the benchmarks add their own
    status: dict[str, str] = {}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    for bench in BENCHES:
        if (args.only is not None and bench.name not in args.only) or bench.name in args.skip:
            continue
        script = HERE / bench.script
        if not script.exists():
            status[bench.name] = "not run: the script is not in this tree"
            print(f"== {bench.name}: {status[bench.name]}", flush=True)
            continue
        command = [sys.executable, str(script), *(bench.quick if args.quick else bench.full)]
        print(f"== {bench.name}: {' '.join(command[1:])}", flush=True)
        begun = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env=env, check=False)
        took = time.perf_counter() - begun
        status[bench.name] = (
            f"ran in {took:.0f} s"
            if done.returncode == 0
            else f"FAILED (exit {done.returncode}) after {took:.0f} s"
        )
        print(f"== {bench.name}: {status[bench.name]}", flush=True)

    lines = [
        "# Performance",
        "",
        "What gpuwhy costs and how it scales, measured by the scripts in `bench/`. Regenerate "
        "this page with `python bench/run_all.py` (about an hour on a 2-core machine; "
        "`--quick` for a shorter check). Each section below is the result file the benchmark "
        "wrote (`bench/results/`), with the command that produced it.",
        "",
        (
            f"Generated {started:%Y-%m-%d %H:%M} UTC{' (quick run)' if args.quick else ''} on:"
            if status
            else f"Assembled {started:%Y-%m-%d %H:%M} UTC from the results below "
            "(each gives its own date) on:"
        ),
        "",
        *(machine_desc if status else machine_desc[:-1]),  # the load average only for a run here
        "",
    ]
    for bench in BENCHES:
        result = RESULTS / f"{bench.name}.md"
        lines += [f"## {bench.what}", ""]
        if bench.name in status:
            lines += [f"*This run: {status[bench.name]}.*", ""]
        if result.exists():
            lines += [_demoted(result.read_text(encoding="utf-8")), ""]
        else:
            lines += ["No results yet.", ""]
    known = {f"{bench.name}.md" for bench in BENCHES}
    for result in sorted(RESULTS.glob("*.md")):  # e.g. diagnosis accuracy, written by its tests
        if result.name not in known:
            text = result.read_text(encoding="utf-8").strip()
            title = text.splitlines()[0].lstrip("# ") if text.startswith("# ") else result.stem
            lines += [f"## {title}", "", _demoted(text), ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out}")
    failed = [name for name, text in status.items() if text.startswith("FAILED")]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
