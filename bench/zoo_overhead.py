"""Overhead of `gpuwhy run` on the zoo: each real-world job (tests/zoo) bare and under gpuwhy.

Each pair runs the job bare and under `gpuwhy run --quiet` back to back, alternating which goes
first, each in a fresh working folder. Reported per job, as medians over pairs of the per-pair
ratio (under gpuwhy / bare) with a 95 % bootstrap interval:

- *the job's own time*: the script's run inside its process (bench/zoo_clock.py starts the
  clock once the interpreter is up and stops it when the script ends: framework imports, hooks
  and training), the cost gpuwhy puts inside the job. Jobs started by a launcher (torchrun,
  accelerate) run their script in a child process the clock cannot wrap: wall time only.
- *end-to-end wall time*: what the user waits, gpuwhy's start-up and wrap-up included; on jobs
  of a few seconds that fixed cost weighs more than on a real training, so the seconds it adds
  are given beside the ratio.

gpuwhy's own CPU (its process and the environment probe, from the recording) is given too.
A job that names its Python (a test environment: "..., Python 3.12") runs with that
interpreter, bare and under gpuwhy, as tests/zoo runs it; `gpuwhy run` itself runs with this one.
Results go to bench/results/zoo_overhead.md with the machine and date; a run of some jobs
(`-k`) to the file `--out` names, whose rows are then put in by hand.

    python bench/zoo_overhead.py [--pairs 3] [-k TEXT ... --out FILE]
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import machine
import pytest  # framework_env skips or fails as in a test: here, a job left out
from one_line_args import OneLineParser
from overhead import children_cpu_s, compile_gpuwhy, from_recording, median_interval

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))  # the zoo's members are test data
from support import framework_env  # noqa: E402
from zoo.members import MEMBERS, Member  # noqa: E402

CLOCK = HERE / "zoo_clock.py"
MAX_PAIRS = 20
TIMEOUT_S = 600.0
TARGET = 1.01  # the goal for the job's own time on a CPU job


@dataclass
class Runs:
    """One member's pairs: per pair and side, (wall s, the job's own s or None, CPU s, the
    job's full garbage collections or None)."""

    member: Member
    bare: list[tuple[Any, ...]] = field(default_factory=list)
    gpuwhy: list[tuple[Any, ...]] = field(default_factory=list)
    own_cpu: list[tuple[float, float]] = field(default_factory=list)  # recorder, probe


def _python(member: Member) -> str | None:
    """The interpreter that runs the member's job, as tests/zoo runs it: its test environment's
    (`interpreter`, made by scripts/test-envs.sh), else this one; None where that environment
    is missing."""
    if not member.interpreter:
        return sys.executable
    try:
        return str(framework_env(member.interpreter))
    except (pytest.skip.Exception, pytest.fail.Exception):
        return None


def _job(member: Member, clock: Path) -> list[str]:
    """The member's command with its own interpreter; a plain `python SCRIPT` one through the
    clock (which that interpreter runs too)."""
    python = _python(member)
    assert python is not None  # main() left out the members whose environment is missing
    command = member.command(python)
    if member.launcher != "python":
        return command
    return [python, str(CLOCK), str(clock), *command[1:]]


def _run(command: list[str], member: Member, folder: Path, clock: Path) -> tuple[float, ...]:
    folder.mkdir()
    start, cpu = time.monotonic(), children_cpu_s()
    done = subprocess.run(
        command,
        cwd=folder,
        env={**os.environ, **member.env},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    wall, cpu = time.monotonic() - start, children_cpu_s() - cpu
    if done.returncode != member.exit_code:
        joined = " ".join(command)
        raise SystemExit(
            f"zoo_overhead.py: {member.name} exited {done.returncode}, expected "
            f"{member.exit_code}: {joined}\n{done.stderr[-2000:]}"
        )
    clocked = json.loads(clock.read_text()) if clock.exists() else {}
    clock.unlink(missing_ok=True)
    return wall, clocked.get("job_s"), cpu, clocked.get("full_gcs")


CLUSTER_PAIRS = 3
"""A job of several ranks starts a cluster (gRPC servers, a collective group) whose set-up varies
by hundreds of ms from run to run: it runs this many times the pairs (with 3 pairs, the
multi-worker Keras 2 members' intervals spanned 0.85-1.27 on 2026-11-27)."""


def _pairs_for(member: Member, pairs: int) -> int:
    return min(pairs * CLUSTER_PAIRS, MAX_PAIRS) if member.ranks > 1 else pairs


def measure(member: Member, pairs: int, scratch: Path) -> Runs:
    """`scratch`: a folder of this member's own."""
    runs = Runs(member)
    scratch.mkdir()
    for pair in range(pairs):
        record = scratch / f"{pair}.gpuwhy.db"
        clock = scratch / "clock.json"
        bare = _job(member, clock)
        under = [sys.executable, "-m", "gpuwhy", "run", "--quiet", "--record", str(record)]
        under += ["--", *bare]
        order = ("bare", "gpuwhy") if pair % 2 == 0 else ("gpuwhy", "bare")
        for side in order:
            folder = scratch / f"{pair}-{side}"
            result = _run(bare if side == "bare" else under, member, folder, clock)
            getattr(runs, side).append(result)
        _, recorder_cpu_s, probe_cpu_s = from_recording(record)
        runs.own_cpu.append((recorder_cpu_s, probe_cpu_s))
        print(
            f"{member.name} pair {pair + 1}/{pairs}: bare {runs.bare[-1][0]:.2f} s, "
            f"gpuwhy {runs.gpuwhy[-1][0]:.2f} s",
            flush=True,
        )
    return runs


def _ratio(runs: Runs, column: int) -> str:
    """'median [low, high]' of the per-pair ratios of one column; '—' where it was not taken."""
    pairs = list(zip(runs.gpuwhy, runs.bare, strict=True))
    if any(g[column] is None or b[column] is None for g, b in pairs):
        return "—"
    ratios = [g[column] / b[column] for g, b in pairs]  # type: ignore[operator]
    low, high = median_interval(ratios)
    return f"{statistics.median(ratios):.3f} [{low:.3f}, {high:.3f}]"


def _median_taken(values: Iterable[float]) -> str:
    """The median of the figures the recordings hold ('—' if none: a job that ends before the
    environment probe does records no probe cost)."""
    taken = [v for v in values if not math.isnan(v)]
    return f"{statistics.median(taken):.2f}" if taken else "—"


def _collections(runs: Runs) -> str:
    """'bare / gpuwhy' medians of the job's full garbage collections ('—' where not taken)."""
    counts = [[r[3] for r in side] for side in (runs.bare, runs.gpuwhy)]
    if any(None in side for side in counts):
        return "—"
    return " / ".join(f"{statistics.median(side):g}" for side in counts)


def row(runs: Runs) -> str:
    bare_s = statistics.median(r[0] for r in runs.bare)
    added_s = statistics.median(g[0] - b[0] for g, b in zip(runs.gpuwhy, runs.bare, strict=True))
    recorder = _median_taken(c[0] for c in runs.own_cpu)
    probe = _median_taken(c[1] for c in runs.own_cpu)
    cells = (
        runs.member.name,
        runs.member.launcher,
        f"{bare_s:.2f}",
        _ratio(runs, 1),
        _ratio(runs, 0),
        f"{added_s:+.2f}",
        _collections(runs),
        f"{recorder} / {probe}",
    )
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def document(all_runs: list[Runs], pairs: int, load: tuple[float, float]) -> str:
    lines = [
        "# Overhead of `gpuwhy run` on the zoo",
        "",
        f"- Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {machine.describe()}",
        f"- Method: `python bench/zoo_overhead.py --pairs {pairs}`: per job, {pairs} pairs "
        f"({min(pairs * CLUSTER_PAIRS, MAX_PAIRS)} for a job of several ranks, whose cluster "
        "set-up is noisy), bare and `gpuwhy run --quiet` alternated (order swapped every pair), "
        "each run in a fresh folder; medians over pairs of the per-pair ratio (gpuwhy / bare), "
        "95 % bootstrap interval in brackets (2000 resamples of the pairs). gpuwhy's bytecode "
        "compiled first.",
        f"- Load average (1 min) before / after: {load[0]:.2f} / {load[1]:.2f}.",
        "- A job whose name gives a Python version runs with that interpreter (its test "
        "environment, scripts/test-envs.sh), bare and under gpuwhy; `gpuwhy run` runs with the "
        "one above.",
        f"- Goal for the job's own time: ≤ {TARGET} on a CPU job. The zoo's jobs train for a few "
        "seconds, so framework imports weigh heavily in the job's own time and gpuwhy's start-up"
        " in the wall time; bench/overhead.py measures longer trainings.",
        "",
        "| job | launcher | bare wall s | job's own time | wall time | added wall s | "
        "full collections (bare / gpuwhy) | gpuwhy CPU s (process / probe) |",
        "|---|---|---|---|---|---|---|---|",
        *(row(runs) for runs in all_runs),
        "",
        "'—': a launcher runs the script in a child process the clock cannot wrap.",
        "",
        "Full collections: the garbage collections of the oldest generation the job's process "
        "ran (median over pairs). CPython runs one when the objects that survived since the last"
        " reach a quarter of the long-lived ones; in a process that loaded a framework one takes"
        " a tenth of a second or more (TensorFlow: ~0.18 s over ~350,000 objects on this "
        "machine). gpuwhy's hooks keep ~1,400 objects alive, enough to move one collection into "
        "a short job that sat just below that line: where the sides differ by one, so does the "
        "job's time, by that collection, not by a cost per step (docs/hooks.md, \"Objects kept "
        'alive").',
    ]
    return "\n".join(lines) + "\n"


def _installed(member: Member) -> bool:
    """Whether the member's job can run: its test environment made (which holds what it needs,
    as tests/zoo trusts it), else its modules importable here."""
    if member.interpreter:
        return _python(member) is not None
    return all(importlib.util.find_spec(name) is not None for name in member.needs)


def _compile_for(members: list[Member]) -> None:
    """gpuwhy byte-compiled for each other interpreter the members run (their jobs import gpuwhy
    from this checkout: uncompiled, the first run under gpuwhy would compile it)."""
    import gpuwhy

    folder = str(Path(gpuwhy.__file__).parent)
    for python in sorted({_python(m) for m in members if m.interpreter} - {None}):
        subprocess.run([str(python), "-m", "compileall", "-q", folder], check=False)


RESULTS = HERE / "results" / "zoo_overhead.md"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="zoo_overhead.py", description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3, help=f"per job, 1 to {MAX_PAIRS}")
    parser.add_argument(
        "-k",
        dest="select",
        action="append",
        default=[],
        metavar="TEXT",
        help="only the jobs whose name or script holds TEXT (repeatable)",
    )
    parser.add_argument("--out", type=Path, help=f"default {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    if args.out is None:
        if args.select:  # the committed table holds every job: a few must not replace it
            parser.error("-k measures only some jobs: give --out FILE for their rows")
        args.out = RESULTS
    os.environ.setdefault("GPUWHY_TEST_ENVS", str(ROOT / ".venvs"))  # scripts/test-envs.sh's
    if not 1 <= args.pairs <= MAX_PAIRS:
        parser.error(f"--pairs {args.pairs}: give 1 to {MAX_PAIRS}")
    if args.out.is_dir():
        parser.error(f"--out {args.out} is a folder: give a file name")
    chosen = [
        m
        for m in MEMBERS
        if not args.select or any(t in m.name or t in m.script for t in args.select)
    ]
    if not chosen:
        parser.error(f"-k {' '.join(args.select)}: no zoo job matches")
    missing = [m.name for m in chosen if not _installed(m)]
    if missing:
        parser.error(
            f"not installed for {', '.join(missing)}: run bash scripts/zoo-deps.sh "
            "(bash scripts/test-envs.sh for a job with its own Python)"
        )
    compile_gpuwhy()
    _compile_for(chosen)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        all_runs = [
            measure(member, _pairs_for(member, args.pairs), Path(scratch, str(index)))
            for index, member in enumerate(chosen)
        ]
    text = document(all_runs, args.pairs, (load_before, os.getloadavg()[0]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
