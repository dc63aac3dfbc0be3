"""The steady-state family: gpuwhy's data-wait share and `phase_speedup` against measured truth.

Each member is one run of tests/scenarios/scripts/steady_sweep.py: a training loop (Keras `fit`,
a `GradientTape` loop, a PyTorch loop, a JAX loop whose step is dispatched asynchronously) over an
input pipeline of a given kind and delay per batch (serial, prefetched, parallel, a Python or a
native op, a generator, DataLoader without workers or with two or four, workers that compute),
at a short step and a long one, trained in alternated rounds as
built, with its input made free, and as built under gpuwhy's hooks. Truth comes from the job's
own clock over its steady steps; gpuwhy's figures from its analysis of every span of the hooked
run. Targets (the issue's): data-wait share within 0.05, `phase_speedup` within 15 %.

Writes bench/results/steady_truth.md and the table in docs/data-wait.md (between its
`steady-truth` markers), with the machine and the date.

    python bench/steady_truth.py [--rounds 5] [--members fit-map-10 tape-generator-10 ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import machine

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
JOB = ROOT / "tests" / "scenarios" / "scripts" / "steady_sweep.py"
DOC = ROOT / "docs" / "data-wait.md"
BEGIN, END = "<!-- steady-truth:begin -->", "<!-- steady-truth:end -->"
SHARE_TOLERANCE = 0.05
SPEEDUP_TOLERANCE = 0.15


@dataclass(frozen=True)
class Member:
    loop: str  # fit, tape, torch, jax
    input: str  # a kind steady_sweep.py takes: map, prefetch, native, loader0, burn2, ...
    delay_ms: float
    what: str
    width: int = 512  # hidden units: the compute
    python312: bool = False  # run by Python 3.12 (a plain generator's reads are timed there)
    tag: str = ""  # tells apart members of one loop, input and delay (a wider model)

    @property
    def name(self) -> str:
        return f"{self.loop}-{self.input}-{self.delay_ms:g}" + (f"-{self.tag}" if self.tag else "")


FAMILY = (
    Member("fit", "map", 10, "Keras `fit`, a serial `tf.data` map"),
    Member("fit", "map", 3, "Keras `fit`, a short serial map"),
    Member("fit", "prefetch", 10, "Keras `fit`, the map with `prefetch(1)`"),
    Member("fit", "parallel", 10, "Keras `fit`, two map calls in flight, `prefetch(2)`"),
    Member("fit", "native", 10, "Keras `fit`, a serial native sleep (no Python in the input)"),
    Member("fit", "generator", 10, "Keras `fit` over `from_generator`"),
    Member("tape", "map", 10, "`GradientTape` loop, a serial map"),
    Member("tape", "map", 3, "`GradientTape` loop, a short serial map"),
    Member("tape", "generator", 10, "`GradientTape` loop over `from_generator`"),
    Member("tape", "prefetch", 10, "`GradientTape` loop, the map with `prefetch(1)`"),
    Member("tape", "parallel", 10, "`GradientTape` loop, two map calls in flight, `prefetch(2)`"),
    Member("tape", "native", 10, "`GradientTape` loop, a serial native sleep"),
    Member("tape", "map", 20, "`GradientTape` loop, a serial map, a long step", 2048, tag="long"),
    Member("torch", "loader0", 10, "PyTorch, `DataLoader(num_workers=0)`"),
    Member("torch", "loader0", 3, "PyTorch, a short `num_workers=0` load"),
    Member("torch", "loader2", 10, "PyTorch, two persistent workers"),
    Member("torch", "loader4", 40, "PyTorch, four persistent workers"),
    Member("torch", "loader0", 20, "PyTorch, `num_workers=0`, a long step", 2048, tag="long"),
    # The only input that computes: its workers and the step share the two cores.
    Member("torch", "burn2", 30, "PyTorch, two workers whose batches compute (a decode)"),
    # The step is dispatched while the loop reads: reads shorter than it are hidden (5 ms
    # beside the 6-7 ms step of 2026-11-27's machine; the `step (fast)` column says which held).
    Member("jax", "generator", 5, "JAX loop over a generator, short reads", 2048, True),
    Member("jax", "generator", 20, "JAX loop over a generator, long reads", 2048, True),
    Member("jax", "numpy", 5, "JAX loop over `as_numpy_iterator()`, short reads", 2048),
    Member("jax", "numpy", 20, "JAX loop over `as_numpy_iterator()`, long reads", 2048),
)
BY_NAME = {member.name: member for member in FAMILY}


def measure(member: Member, rounds: int) -> dict[str, Any]:
    """One member's truth and gpuwhy's figures (steady_sweep.py's JSON line)."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests" / "analysis")]),
        TF_CPP_MIN_LOG_LEVEL="3",
    )
    if member.python312 and not machine.PY312.exists():
        raise RuntimeError(f"{member.name}: no {machine.PY312} (scripts/test-envs.sh py312-jax)")
    command = [
        str(machine.PY312) if member.python312 else sys.executable,
        str(JOB),
        member.loop,
        member.input,
        "--delay-ms",
        str(member.delay_ms),
        "--rounds",
        str(rounds),
        "--width",
        str(member.width),
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{member.name} failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def misses(
    result: dict[str, Any], share: float = SHARE_TOLERANCE, speedup: float = SPEEDUP_TOLERANCE
) -> list[str]:
    """What misses the targets (or the bounds given)."""
    found = []
    if abs(result["error"]) > share:
        found.append(f"share {result['measured']:.3f} vs true {result['truth']:.3f}")
    if abs(result["speedup_error"]) > speedup:
        found.append(
            f"phase_speedup {result['speedup_measured']:.2f} vs true {result['speedup_truth']:.2f}"
        )
    return found


def table(rows: list[tuple[Member, dict[str, Any]]]) -> str:
    lines = [
        "| member | step (fast) | true share | own clock | gpuwhy | error | true speed-up | "
        "`phase_speedup` | error | hooks' cost |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for member, r in rows:
        own = "–" if r.get("blocked") is None else f"{r['blocked']:.3f}"
        lines.append(
            f"| {member.what}, {member.delay_ms:g} ms a batch | {r['step_ms_fast']:.1f} ms | "
            f"{r['truth']:.3f} | {own} | {r['measured']:.3f} | {r['error']:+.3f} | "
            f"{r['speedup_truth']:.2f}x | {r['speedup_measured']:.2f}x | "
            f"{r['speedup_error']:+.1%} | {r['overhead']:+.1%} |"
        )
    return "\n".join(lines) + "\n"


def _write(rows: list[tuple[Member, dict[str, Any]]], rounds: int) -> None:
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    head = (
        f"Measured {when} on {machine.describe()}, {rounds} alternated rounds per member "
        "(`python bench/steady_truth.py`). Errors are medians over rounds of the paired "
        "differences (share) and ratios (speed-up) against the truth; *own clock*: the share "
        "of a plain loop's steady time its own timer saw in `next()` in the hooked runs.\n\n"
    )
    body = head + table(rows)
    results = HERE / "results" / "steady_truth.md"
    results.write_text("# Steady-state family: gpuwhy against truth\n\n" + body, encoding="utf-8")
    text = DOC.read_text(encoding="utf-8")
    if BEGIN in text and END in text:
        before, rest = text.split(BEGIN, 1)
        after = rest.split(END, 1)[1]
        DOC.write_text(f"{before}{BEGIN}\n{body}{END}{after}", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternated rounds per member")
    parser.add_argument(
        "--members", nargs="+", choices=sorted(BY_NAME), help="members to run (default: all)"
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    chosen = [BY_NAME[n] for n in args.members] if args.members else list(FAMILY)
    rows = []
    for member in chosen:
        try:
            result = measure(member, args.rounds)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            print(f"steady_truth: {error}", file=sys.stderr)
            return 1
        rows.append((member, result))
        print(f"{member.name}: {', '.join(misses(result)) or 'within targets'}", flush=True)
    print(table(rows))
    if not args.members:
        _write(rows, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
