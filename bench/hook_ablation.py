"""Which of gpuwhy's per-step hooks a Keras step's cost lies in: a short-step `fit` run bare, with
every hook, and with each per-step hook switched off in turn.

bench/hook_cost.py measures what the hooks cost a step; this tells where. The job is
hook_cost.py's Keras job (Dense 64-1 over NumPy arrays, one epoch a run) on the JAX or the torch
backend, where Keras pulls its batches in Python and each step's hooks run on the training
thread. Each round runs every variant once, in an order rotated every round and reversed every
other one, after a warm-up round. Reported: per variant, the median µs per step of wall time
and of the training thread's CPU time (`time.thread_time` of the thread running `fit`: its
work, gpuwhy's included, and its waits for the runtime where they spin; not what Keras's
callback thread or gpuwhy's flusher do beside it), and the medians of the per-round
differences from the bare run.

A variant replaces gpuwhy's code, in this process only, with a body that does nothing: the
callback's batch hooks (`KerasSpans._begin`, `_done`), the readiness check kept after each
compiled call (`keras_functions._track_completion`), the timing of each pull
(`iterators.timed_next`), the emitting of records (`emitter.emit`); the callback and the
iterator wrapper stay in place. One more keeps every hook but has the readiness check ask a
Python function instead of the backend (JAX's `jax.Array.is_ready`). Each run starts with a
garbage collection and collects nothing while timed. The flusher is held back while a run is
timed: delivering the records is hook_cost.py's to measure. Instruction counts
(bench/hook_instructions.py) cannot settle this: on JAX a bare step's count moves by far more
than the hooks cost from run to run (docs/hooks.md, "Cost"). Nor does time split the cost
among the hooks on JAX: one switch's figure moves by tens of µs from run to run, while every
hook's and all four off's repeat (docs/hooks.md).

    python bench/hook_ablation.py [--backend jax] [--rounds 30] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import machine
from hook_cost import RESULT, child_env, keras_job
from hook_cost import _hooks as hooks
from one_line_args import OneLineParser

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BACKENDS = ("jax", "torch")
STEPS = {False: 400, True: 40}
MAX_ROUNDS = 500

BARE, FULL, ALL_OFF = "bare", "every hook", "every per-step hook off"
SWITCHES = {
    "batch hooks off": "the callback's `_begin` and `_done` (steps opened, closed, stamped)",
    "readiness check off": "the check of each compiled call's results "
    "(`keras_functions._track_completion`)",
    "pull timing off": "`iterators.timed_next` (each pull timed, its readiness asked)",
    "records off": "`emitter.emit` (every record appended for delivery)",
}
DEVICE_NOT_ASKED = "device not asked"


def _nothing(*_: Any, **__: Any) -> None:
    return None


def _done_now() -> bool:
    return True


def _asked_of_python(_: Any) -> Callable[[], bool]:
    return _done_now


def _untimed(next_fn: Callable[[Any], Any], iterator: Any, **_: Any) -> Any:
    return next_fn(iterator)


def _replacements() -> dict[str, list[tuple[Any, str, Any]]]:
    """Per switch: (owner, attribute, stand-in) for each piece of gpuwhy it turns off."""
    from gpuwhy.hooks import emitter, iterators, keras_functions, keras_hooks

    spans = keras_hooks.KerasSpans
    by_switch = {
        "batch hooks off": [(spans, "_begin", _nothing), (spans, "_done", _nothing)],
        "readiness check off": [(keras_functions, "_track_completion", _nothing)],
        "pull timing off": [(iterators, "timed_next", _untimed)],
        "records off": [(emitter, "emit", _nothing)],
    }
    by_switch[ALL_OFF] = [piece for pieces in by_switch.values() for piece in pieces]
    # The readiness check kept, but asking a Python function, not the backend: what the
    # backend's own check costs (JAX's `is_ready`; on the CPU, torch asks nothing).
    asked = [(keras_functions, f"_{name}_readiness", _asked_of_python) for name in BACKENDS]
    by_switch[DEVICE_NOT_ASKED] = asked
    return by_switch


def _clocked(run: Callable[[], None], pieces: list[tuple[Any, str, Any]] | None) -> list[float]:
    """One run: [wall µs, training-thread CPU µs, records emitted]; `pieces` None: bare, else
    hooked with those pieces of gpuwhy replaced (installed before the hooks, restored after)."""
    from gpuwhy.hooks import emitter

    kept = [(owner, name, getattr(owner, name)) for owner, name, _ in pieces or ()]
    if pieces is not None:
        for owner, name, stand_in in pieces:
            setattr(owner, name, stand_in)
        hooks(True)
    # A full collection (~0.1 s in a process that loaded a framework) lands in whichever run
    # reaches its threshold: each run starts collected, and collects nothing while timed.
    gc.collect()
    gc.disable()
    wall, cpu = time.perf_counter(), time.thread_time()
    run()
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    gc.enable()
    emitted = len(emitter._buffer)  # held back: what this run emitted, none where it is off
    if pieces is not None:
        emitter.flush(30.0)
        hooks(False)
        for owner, name, original in kept:
            setattr(owner, name, original)
    return [wall * 1e6, cpu * 1e6, emitted]


def child(rounds: int, quick: bool) -> dict[str, Any]:
    """Every variant, `rounds` rounds, in this process: per variant, per round, µs per step of
    wall and training-thread CPU time, and records emitted a step."""
    from gpuwhy.hooks import emitter

    emitter.FLUSH_INTERVAL_S = 3600.0  # held back while a run is timed
    steps = STEPS[quick]
    label, job = keras_job(steps)
    run = job(steps)
    switched = _replacements()
    variants: dict[str, list[tuple[Any, str, Any]] | None] = {BARE: None, FULL: []}
    variants.update(switched)
    names = list(variants)
    for name in names:  # the warm-up round
        _clocked(run, variants[name])
    runs: dict[str, list[list[float]]] = {name: [] for name in names}
    for number in range(rounds):
        order = names[number % len(names) :] + names[: number % len(names)]
        for name in order if number % 2 == 0 else order[::-1]:
            wall, cpu, emitted = _clocked(run, variants[name])
            runs[name].append([wall / steps, cpu / steps, emitted / steps])
    return {"label": label, "steps": steps, "runs": runs}


def table(found: dict[str, Any]) -> list[str]:
    runs = found["runs"]
    bare = runs[BARE]
    lines = [
        "| variant | what it leaves out | wall µs per step | wall, over bare | "
        "training thread CPU µs per step | thread CPU, over bare | records a step |",
        "|---|---|---|---|---|---|---|",
    ]
    what = {BARE: "gpuwhy (no hooks installed)", FULL: "nothing", **SWITCHES}
    what[ALL_OFF] = "all four: what is left is the callback and the wrappers being there"
    what[DEVICE_NOT_ASKED] = (
        "the backend's readiness call: the check asks a Python function that says done"
    )
    for name, rows in runs.items():
        medians = [statistics.median(row[k] for row in rows) for k in (0, 1)]
        over = [
            statistics.median(row[k] - base[k] for row, base in zip(rows, bare, strict=True))
            for k in (0, 1)
        ]
        lines.append(
            f"| {name} | {what[name]} | {medians[0]:.1f} | {over[0]:+.1f} | "
            f"{medians[1]:.1f} | {over[1]:+.1f} | {statistics.median(r[2] for r in rows):.2f} |"
        )
    return lines


def document(args: argparse.Namespace, found: dict[str, Any], load: str) -> str:
    command = f"python bench/hook_ablation.py --backend {args.backend} --rounds {args.rounds}"
    versions = ", ".join(
        f"{name} {v}" for name in ("keras", args.backend) if (v := machine.version(name))
    )
    lines = [
        f"# Where a Keras step's hook cost lies, on {args.backend}",
        "",
        f"- Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {machine.describe()}; {versions}",
        f"- Command: `{command}{' --quick' if args.quick else ''}`",
        f"- Load average (1 min) before / after: {load}",
        f"- Job: {found['label']}, {found['steps']} steps a run; {args.rounds} rounds, every "
        "variant once a round, the order rotated every round and reversed every other one.",
        '- Medians over rounds; "over bare": the median of the per-round differences from the '
        "bare run. Delivering the records (gpuwhy's flusher thread) is left out: "
        "bench/results/hook_cost.md has it. Records a step: what a run emitted (its phases' "
        "once), over its steps; a switch that takes out what emits them shows here.",
        "",
        *table(found),
    ]
    return "\n".join(lines) + "\n"


def parent(args: argparse.Namespace) -> int:
    missing = [name for name in ("keras", args.backend) if importlib.util.find_spec(name) is None]
    if missing:
        raise SystemExit(
            f"hook_ablation.py: {' and '.join(missing)} not installed here: install them "
            "(bash scripts/setup.sh installs both) or run another --backend"
        )
    load_before = os.getloadavg()[0]
    env = child_env(args.backend)
    command = [sys.executable, str(Path(__file__).resolve()), "--child"]
    command += ["--backend", args.backend, "--rounds", str(args.rounds)]
    done = subprocess.run(
        [*command, *(["--quick"] if args.quick else [])],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode != 0 or not lines:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"hook_ablation.py: the {args.backend} job failed: {tail[0]}")
    found = json.loads(lines[-1][len(RESULT) :])
    text = document(args, found, f"{load_before:.2f} / {os.getloadavg()[0]:.2f}")
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"-> {args.out}")
    return 0


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=BACKENDS, default="jax")
    parser.add_argument("--rounds", type=int, help="rounds of every variant (30; --quick: 3)")
    parser.add_argument("--quick", action="store_true", help="a short run, to check it works")
    parser.add_argument(
        "--out",
        type=Path,
        help="(default bench/results/hook_ablation.md on JAX, hook_ablation_BACKEND.md on others)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 3 if args.quick else 30
    if not 1 <= args.rounds <= MAX_ROUNDS:
        parser.error(f"--rounds {args.rounds}: give 1 to {MAX_ROUNDS}")
    if args.out is None:
        suffix = "" if args.backend == BACKENDS[0] else f"_{args.backend}"
        args.out = HERE / "results" / f"hook_ablation{suffix}.md"
    if args.out.is_dir():
        parser.error(f"--out {args.out} is a folder: give a file name")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if not args.child:
        return parent(args)
    print(RESULT + json.dumps(child(args.rounds, args.quick)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
