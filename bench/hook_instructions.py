"""The hooks' cost per step in CPU instructions, counted by valgrind: noise-free where time is not.

Wall and CPU time per step (hook_cost.py) move with everything else the machine does; the
instructions a step executes do not. This runs hook_cost.py's short-step PyTorch loop (and, with
`--jobs torch keras`, its Keras one) under `valgrind --tool=cachegrind --cache-sim=no`, bare and
with the hooks installed, each at two lengths; the slope between them is the instructions per
step, free of start-up and import. A third run of each is hooked with a `--profile` window
armed, as `gpuwhy run --profile` arms it (`GPUWHY_PROFILE` in the job's environment), but set to
open after more steps than the long run has: its slope is a step's cost outside the window. A
fixed hash seed, one BLAS and OpenMP thread (and one in
each of TensorFlow's pools), and records delivered once at the end (on the calling thread, as
`flush()` does: the flusher's timing under valgrind's slow clock would count) keep the counts
repeatable. The hooked count includes attributing and encoding the step's records, as
`gpuwhy run`'s socket would receive them.

`--jobs delivery` counts the flusher thread's share instead: attributing the records of a
Keras-on-JAX step and making its spans' lines for the socket (records made alike in both runs,
delivered only in the hooked one), in deliveries of 0.2 s of its ~0.3 ms steps. That work holds
the interpreter while the training thread would run, so it costs a step as much as a hook does.

`--against REV` counts another revision's hooks in the same run (a git worktree of it), so a
change to the hooks is judged side by side. Needs valgrind (`apt install valgrind`); each job
takes a few minutes (torch's import alone is ~3 min under valgrind).

    python bench/hook_instructions.py [--jobs torch keras delivery] [--against REV] [--repeat 2]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import machine
from one_line_args import OneLineParser

from gpuwhy.cli.run import PROFILE_STEPS
from gpuwhy.wire import ENV_PROFILE

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
JOBS = ("torch", "keras", "delivery")
LABELS = {
    "torch": "PyTorch loop",
    "keras": "Keras `fit` on tensorflow",
    "delivery": "delivery of a Keras-on-JAX step's records (flusher thread)",
}
DELIVERY_EVERY = 700  # steps a delivery holds: 0.2 s of Keras-on-JAX steps of ~0.3 ms
VARIANTS = ("bare", "hooked", "armed")  # armed: hooked, with a `--profile` window to come
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")
METHOD = (
    "hook_cost.py's short-step jobs under valgrind's cachegrind: instructions per step, the "
    "slope between runs of {few} and {many} steps (start-up and imports cancel out). Hooked: "
    "`auto.install({{}})`, each step's records attributed and encoded as for `gpuwhy run`'s "
    "socket. Armed: hooked, and `GPUWHY_PROFILE` set as `gpuwhy run --profile {profile}` sets it "
    "but for a window that opens after {skip} steps, so never in these runs (checked: no trace "
    "written); armed − hooked is what an armed window costs a step outside it. "
    "TensorFlow runs with one thread in each of its pools (idle pool threads spin, by timing). "
    "Within one run a count repeats to a few instructions a step, but between runs of "
    "this script the same code's counts moved by up to ~7k a step, bare and hooked alike "
    "(likely where the interpreter's objects land, which changes its hashing), and once the "
    "Keras job's bare count alone by 43k (2026-11-29: 2.568M, where three repeats of another "
    "run read 2.525M within 0.2k), so a run's hooked and bare counts are read together; a revision "
    "counted from a worktree read ~2k a step more than the same code counted in place "
    "(2026-11-28); so revisions are compared in one run (`--against`), and differences under "
    "~5k a step (a tenth of the hooks' cost on the PyTorch loop, where wall time moves by more "
    "than all of it) are not resolved. Instructions are not time: a cache miss costs more than "
    "an addition. Delivery (`--jobs delivery`): the records of a Keras-on-JAX step (a pull, "
    "the step, its completion), made in both runs, and in the hooked one delivered by the "
    "emitter {every} steps at a time to a sink of the socket's lines; no step of a job's own, "
    "so no share and no armed variant."
)


def child(job: str, steps: int, hooked: bool) -> None:
    """One run of `job` for `steps` steps, in this process (the one valgrind counts)."""
    if job == "delivery":
        deliver(steps, hooked)
        return
    import hook_cost

    from gpuwhy.hooks import emitter

    emitter.FLUSH_INTERVAL_S = 3600.0  # delivered by flush() below, on this thread
    _, runs = hook_cost.torch_job(steps) if job == "torch" else hook_cost.keras_job(steps)
    run = runs(steps)
    if hooked:
        hook_cost._hooks(True)
    run()
    if hooked:
        emitter.flush(60.0)


def deliver(steps: int, hooked: bool) -> None:
    """The records a Keras `fit` on JAX sends for `steps` steps (a pull whose readiness check
    found the last step done, the step, its completion), made; `hooked`: also delivered by the
    emitter, `DELIVERY_EVERY` steps at a time, to the sink hook_cost.py times deliveries with
    (lines, as the socket takes them).
    Bare, only the records are made: the difference is the delivery's own work."""
    import hook_cost

    from gpuwhy.hooks import emitter
    from gpuwhy.hooks.attribution import (
        CHECKED,
        DONE,
        EXPECT_DONE,
        OVERLAP,
        PULL,
        SRC_HOST,
        STEP,
    )

    mode, us, start = SRC_HOST | OVERLAP | EXPECT_DONE, 1000, time.monotonic_ns()
    records: list[tuple[object, ...]] = []
    for i in range(1, steps + 1):
        t = start + i * 300 * us  # (none older than the stale facts the delivery forgets)
        prev = i - 1 if i > 1 else None
        records += [
            (PULL, i, t, t + 20 * us, CHECKED),
            (STEP, "train", i, t, t + 300 * us, 1, i, prev, mode),
            (DONE, i, t + 250 * us),
        ]
    if hooked:
        emitter.configure(hook_cost._encode_and_drop)
        every = 3 * DELIVERY_EVERY
        for first in range(0, len(records), every):
            emitter._buffer.extend(records[first : first + every])
            emitter.flush(60.0)


def armed(skip: int, directory: Path) -> dict[str, str]:
    """The environment `gpuwhy run --profile` gives a job (runtime/child.py), for a window of
    `PROFILE_STEPS` steps after the first `skip`, its trace written into `directory`."""
    return {ENV_PROFILE: f"{skip}:{PROFILE_STEPS}:{directory}"}


def never_opens(steps: tuple[int, int]) -> int:
    """A window's `skip` past the long run's steps: the window is armed, and every counted step
    is outside it."""
    return steps[1] + 1


def count(job: str, steps: int, variant: str, src: Path, skip: int = 0) -> int:
    """Instructions valgrind counted for one child run, gpuwhy imported from `src`; `skip`: the
    armed window's."""
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    env.update(GPUWHY_BOOT="0", TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(src))
    env.pop("GPUWHY_SOCKET", None)
    env.pop(ENV_PROFILE, None)  # armed only where asked, as `gpuwhy run` does
    traces = Path(tempfile.mkdtemp(prefix="gpuwhy-armed-"))
    if variant == "armed":
        env.update(armed(skip, traces / "profile"))
    if job == "keras":
        env.setdefault("KERAS_BACKEND", "tensorflow")
        # One thread in each of TensorFlow's pools: idle pool threads spin looking for work,
        # and what they spin depends on timing (the same hooked Keras job counted 122k and
        # 204k a step more than bare in two runs with the default pools; 127k with one thread).
        env.update(TF_NUM_INTEROP_THREADS="1", TF_NUM_INTRAOP_THREADS="1")
    command = [
        "valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
        sys.executable, str(Path(__file__).resolve()),
        "--child", job, "--child-steps", str(steps), "--hooked", str(int(variant != "bare")),
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env,
                              check=False)  # fmt: skip
        # A window that opened would count the profiler: the armed count would be wrong.
        opened = (traces / "profile").exists()
    finally:
        shutil.rmtree(traces, ignore_errors=True)
    found = _REFS.findall(done.stderr)
    if done.returncode != 0 or not found:
        raise SystemExit(f"{job} ({steps} steps) failed under valgrind:\n{done.stderr[-2000:]}")
    if opened:
        raise SystemExit(f"{job} ({steps} steps, {variant}): the profiler window opened")
    return int(found[-1].replace(",", ""))


def per_step(job: str, steps: tuple[int, int], variant: str, src: Path) -> float:
    """Instructions per step: the slope between the two lengths, two runs at once."""
    skip = never_opens(steps)
    with ThreadPoolExecutor(2) as pool:
        short, long = pool.map(lambda n: count(job, n, variant, src, skip), steps)
    return (long - short) / (steps[1] - steps[0])


@contextlib.contextmanager
def revision(rev: str | None) -> Iterator[tuple[str, Path]]:
    """(its name, its `src`): this tree's, or a detached worktree of `rev`."""
    if rev is None:
        yield _this_tree(), ROOT / "src"
        return
    folder = Path(tempfile.mkdtemp(prefix="gpuwhy-rev-"))
    git = ["git", "-C", str(ROOT)]
    subprocess.run([*git, "worktree", "add", "--detach", str(folder), rev], check=True,
                   capture_output=True)  # fmt: skip
    try:
        yield rev, folder / "src"
    finally:
        subprocess.run([*git, "worktree", "remove", "--force", str(folder)], check=False,
                       capture_output=True)  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)


def _this_tree() -> str:
    """ "this tree (<commit>)", and whether its gpuwhy differs from that commit."""
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    changed = subprocess.run([*git, "status", "--porcelain", "--", "src"], capture_output=True,
                             text=True)  # fmt: skip
    if head.returncode != 0:
        return "this tree"
    return f"this tree ({head.stdout.strip()}{', changed' if changed.stdout.strip() else ''})"


def measure(args: argparse.Namespace) -> list[str]:
    steps = (args.steps[0], args.steps[1])
    rows = []
    for job in args.jobs:
        print(f"== {job}: bare", flush=True)
        bare = [per_step(job, steps, "bare", ROOT / "src") for _ in range(args.repeat)]
        for rev in [None, *([args.against] if args.against else [])]:
            with revision(rev) as (name, src):
                counted = {}
                for variant in VARIANTS[1:] if job != "delivery" else ["hooked"]:
                    print(f"== {job}: {variant}, {name}", flush=True)
                    counted[variant] = [
                        per_step(job, steps, variant, src) for _ in range(args.repeat)
                    ]
            rows.append((job, name, bare, counted["hooked"], counted.get("armed")))
    lines = [
        "| job | gpuwhy | bare instructions per step | hooked | the hooks' (median) | "
        "the hooks' share | hooked, `--profile` armed | outside the window (armed − hooked, "
        "median) | its share of the hooked step |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for job, name, bare, hooked, armed_ in rows:
        cost = statistics.median(hooked) - statistics.median(bare)
        if armed_ is None:  # no step of the job's own: its work is the whole count
            lines.append(f"| {LABELS[job]} | {name} | {_counts(bare)} | {_counts(hooked)} | "
                         f"{cost:,.0f} | — | — | — | — |")  # fmt: skip
            continue
        outside = statistics.median(armed_) - statistics.median(hooked)
        lines.append(
            f"| {LABELS[job]} | {name} | {_counts(bare)} | {_counts(hooked)} | {cost:,.0f} | "
            f"{cost / statistics.median(bare):.1%} | {_counts(armed_)} | {outside:,.0f} | "
            f"{outside / statistics.median(hooked):.2%} |"
        )
    return lines


def _counts(values: list[float]) -> str:
    """The runs' counts per step: one, or the median with the range."""
    if len(values) == 1:
        return f"{values[0]:,.0f}"
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}–{max(values):,.0f})"


def document(args: argparse.Namespace, table: list[str]) -> str:
    against = f" --against {args.against}" if args.against else ""
    command = (
        f"python bench/hook_instructions.py --jobs {' '.join(args.jobs)}{against} "
        f"--repeat {args.repeat}"
    )
    return (
        "\n".join(
            [
                "# The hooks' cost in instructions per step",
                "",
                f"- Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC",
                f"- Machine: {machine.describe()}",
                f"- Command: `{command} --steps {args.steps[0]} {args.steps[1]}`",
                "",
                METHOD.format(
                    few=args.steps[0],
                    many=args.steps[1],
                    profile=PROFILE_STEPS,
                    skip=never_opens((args.steps[0], args.steps[1])),
                    every=DELIVERY_EVERY,
                ),
                "",
                *table,
            ]
        )
        + "\n"
    )


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", nargs="+", choices=JOBS, default=["torch"])
    parser.add_argument("--against", metavar="REV", help="also count this git revision's hooks")
    parser.add_argument("--steps", nargs=2, type=int, default=[100, 1100], metavar=("FEW", "MANY"))
    parser.add_argument("--repeat", type=int, default=2, help="runs of each count (2)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "hook_instructions.md")
    parser.add_argument("--child", choices=JOBS, help=argparse.SUPPRESS)
    parser.add_argument("--child-steps", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--hooked", type=int, choices=(0, 1), default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.repeat <= 10:
        parser.error(f"--repeat {args.repeat}: give 1 to 10")
    if not 1 <= args.steps[0] < args.steps[1]:
        parser.error(f"--steps {args.steps[0]} {args.steps[1]}: give FEW < MANY, both >= 1")
    if args.child is None and shutil.which("valgrind") is None:
        parser.error("valgrind not found: install it (apt install valgrind) to count instructions")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.child is not None:
        child(args.child, args.child_steps, bool(args.hooked))
        return 0
    table = measure(args)
    print("\n".join(table))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(document(args, table), encoding="utf-8")
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
