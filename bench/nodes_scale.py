"""Many nodes: `gpuwhy report DIR/` on a job's node recordings, side by side with one node.

1. Generates one node's recording (tests/support/synth: constructed data shaped like an hour of
   training on 8 GPUs at 10 Hz, labelled synthetic in its meta), or reuses `--recording PATH`.
2. Copies it once per node into a folder, each copy with its own host name and a start wall
   time moved by up to ±50 ms (as NTP leaves real nodes), so the report aligns them.
3. Times `gpuwhy report ONE --json` and `gpuwhy report DIR/ --json` alternately, `--repeat`
   times each, on one core (`taskset -c 0` where there is one): wall time, CPU time (user +
   system) and peak RSS of each child; the best of each and the ratio of the medians.

Goal (issue): 64 nodes x 8 GPUs x 1 h reported in under 60 s on one core.

    python bench/nodes_scale.py [--nodes 64] [--hours 1] [--gpus 8] [--repeat 2] [--out ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import machine

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
sys.path.insert(0, str(TESTS))  # the synthetic recording generator is test support


def _node_copies(recording: Path, folder: Path, nodes: int) -> None:
    rng = random.Random(0)
    for node in range(nodes):
        copy = folder / f"job-node{node}.gpuwhy.db"
        shutil.copy(recording, copy)
        with sqlite3.connect(copy) as db:
            (wall,) = db.execute("SELECT value FROM meta WHERE key = 'start_wall_s'").fetchone()
            moved = json.loads(wall) + (rng.uniform(-0.05, 0.05) if node else 0.0)
            db.execute("UPDATE meta SET value = ? WHERE key = 'start_wall_s'", (json.dumps(moved),))
            db.execute(
                "UPDATE meta SET value = ? WHERE key = 'hostname'", (json.dumps(f"node-{node}"),)
            )
        db.close()


def _timed(
    target: Path, scratch: Path, *, pinned: bool = True, workers: str | None = None
) -> dict[str, float]:
    """One `gpuwhy report TARGET --json` child: wall, CPU and peak RSS (its own rusage, with
    the worker processes it waited for). Pinned to one core, or on every core with its
    workers (`workers`: GPUWHY_WORKERS for it)."""
    pin = ["taskset", "-c", "0"] if pinned and shutil.which("taskset") else []
    env = None if workers is None else dict(os.environ, GPUWHY_WORKERS=workers)
    out = scratch / "report.json"
    started = time.perf_counter()
    with open(out, "wb") as stdout:
        child = subprocess.Popen(
            [*pin, sys.executable, "-m", "gpuwhy", "report", str(target), "--json"],
            stdout=stdout,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode not in (0, 1):
        raise SystemExit(f"nodes_scale.py: the report of {target} failed ({child.returncode})")
    report = json.loads(out.read_text())
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "rss_mib": usage.ru_maxrss / 1024,
        "nodes": len(report.get("nodes") or [None]),
        "ranks": len((report.get("ranks") or {}).get("train") or []),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--recording", type=Path, help="one node's recording, made before")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "nodes_scale.md")
    args = parser.parse_args()
    if args.nodes < 2 or args.repeat < 1:
        parser.error("give at least 2 nodes and 1 repeat")
    with tempfile.TemporaryDirectory(prefix="gpuwhy-nodes-") as tmp:
        folder = Path(tmp) / "job"
        folder.mkdir()
        made_s = None
        recording = args.recording
        if recording is None:
            from support.synth import synthesize

            recording = Path(tmp) / "node.gpuwhy.db"
            made_s = synthesize(recording, hours=args.hours, gpus=args.gpus).seconds
        _node_copies(recording, folder, args.nodes)
        size_mb = recording.stat().st_size / 1e6
        one, many, spread, alone = [], [], [], []
        for _ in range(args.repeat):  # alternated: a busy minute slows both alike
            one.append(_timed(recording, Path(tmp)))
            many.append(_timed(folder, Path(tmp)))
            spread.append(_timed(folder, Path(tmp), pinned=False))
            alone.append(_timed(folder, Path(tmp), pinned=False, workers="0"))
    ratio = statistics.median(m["wall_s"] for m in many) / statistics.median(
        o["wall_s"] for o in one
    )
    best_one = min(one, key=lambda m: m["wall_s"])
    best_many = min(many, key=lambda m: m["wall_s"])
    best_spread = min(spread, key=lambda m: m["wall_s"])
    best_alone = min(alone, key=lambda m: m["wall_s"])
    spread_ratio = statistics.median(m["wall_s"] for m in spread) / statistics.median(
        m["wall_s"] for m in alone
    )
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    lines = [
        "# Many nodes: one report for a job's node recordings",
        "",
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC with "
        f"`python bench/nodes_scale.py --nodes {args.nodes} --hours {args.hours:g} "
        f"--gpus {args.gpus} --repeat {args.repeat}` on {machine.describe()}.",
        "",
        f"One node: a synthetic {args.hours:g} h recording of {args.gpus} GPUs at 10 Hz "
        f"({size_mb:.0f} MB"
        + (f", made in {made_s:.0f} s" if made_s is not None else "")
        + f"), copied to {args.nodes} nodes with their own host names and start wall times "
        "moved by up to ±50 ms. Each report runs as a child pinned to one core unless said; "
        f"best of {args.repeat}, alternated.",
        "",
        "| report | nodes read | ranks in the table | wall | CPU | peak RSS |",
        "|---|---|---|---|---|---|",
        f"| `gpuwhy report ONE --json` | {best_one['nodes']:.0f} | {best_one['ranks']:.0f} | "
        f"{best_one['wall_s']:.1f} s | {best_one['cpu_s']:.1f} s | {best_one['rss_mib']:.0f} MiB |",
        f"| `gpuwhy report DIR/ --json` | {best_many['nodes']:.0f} | {best_many['ranks']:.0f} | "
        f"{best_many['wall_s']:.1f} s | {best_many['cpu_s']:.1f} s | "
        f"{best_many['rss_mib']:.0f} MiB |",
        f"| `gpuwhy report DIR/ --json` on {cores} cores, with its worker processes | "
        f"{best_spread['nodes']:.0f} | {best_spread['ranks']:.0f} | "
        f"{best_spread['wall_s']:.1f} s | {best_spread['cpu_s']:.1f} s | "
        f"{best_spread['rss_mib']:.0f} MiB |",
        f"| — on {cores} cores, in one process (`GPUWHY_WORKERS=0`) | "
        f"{best_alone['nodes']:.0f} | {best_alone['ranks']:.0f} | "
        f"{best_alone['wall_s']:.1f} s | {best_alone['cpu_s']:.1f} s | "
        f"{best_alone['rss_mib']:.0f} MiB |",
        "",
        f"{args.nodes} nodes take {ratio:.1f}x one node's time (median wall times, side by side). "
        f"Goal: 64 nodes x 8 GPUs x 1 h under 60 s on one core. On every core, the report's "
        "workers (one per core: src/gpuwhy/analysis/workers.py) read the nodes' GPUs, each "
        "from its own file, while the report's process reads the steps: "
        f"{spread_ratio:.2f} of the time in one process (median wall times, alternated).",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
