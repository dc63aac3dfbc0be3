"""`gpuwhy try [options] -- CMD [ARGS...]`: try the suggested fixes on the job, measure each."""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from gpuwhy.cli.job_command import job_command
from gpuwhy.errors import UsageError

DESCRIPTION = """\
Run CMD as written and with each fix gpuwhy suggests for it, applied in-process (the job's code
and files are never edited), a bounded number of steps each, alternating the order from round
to round; print each fix's estimated and measured speed-up and the one change to make.

Each run stops itself after its steps, before the job's end: model saves and checkpoints to a
path are skipped, so no half-trained model is kept where the full run writes its own. Other
files the job writes as it goes (logs) are listed at the end.

Fixes: PyTorch DataLoader num_workers, pin_memory (with a GPU), persistent_workers,
prefetch_factor; tf.data parallel map and prefetch; Keras steps_per_execution; and, only when
allowed since they change the training's results, map(deterministic=False), a larger batch and
mixed precision. Name your own with --fix SETTING[=VALUE][,SETTING...] (docs/try.md).

exit codes: 0 done (also "nothing to gain"); 2 usage; 5 the job cannot be tried (it measured
no steps as written, no fix applies to it, or it is a distributed launch); 127/126 the command
cannot be found/executed.
"""

DEFAULT_STEPS, DEFAULT_SKIP, DEFAULT_ROUNDS = 50, 10, 3
DEFAULT_TIME_S = 30.0
MAX_ROUNDS = 15
LAUNCHERS = frozenset({"torchrun", "deepspeed", "accelerate", "mpirun", "mpiexec", "srun"})
OPT_IN = ("--allow-reorder", "--allow-batch-size", "--allow-precision")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "try",
        help="try the suggested fixes on the job and measure what each buys",
        description=DESCRIPTION,
        usage="gpuwhy try [options] -- CMD [ARGS...]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=DEFAULT_STEPS,
        metavar="N",
        help=f"batches measured per run, after the warm-up (default {DEFAULT_STEPS})",
    )
    parser.add_argument(
        "--time",
        type=float,
        default=DEFAULT_TIME_S,
        metavar="S",
        help=f"or at most S seconds of them per run, whichever comes first (default "
        f"{DEFAULT_TIME_S:g}; 0: no time limit)",
    )
    parser.add_argument(
        "--skip",
        type=int,
        default=DEFAULT_SKIP,
        metavar="N",
        help=f"warm-up batches left out of each run's figure (default {DEFAULT_SKIP})",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=DEFAULT_ROUNDS,
        metavar="R",
        help=f"alternated rounds (default {DEFAULT_ROUNDS}; more for a noisy machine)",
    )
    parser.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="SETTINGS",
        help="try this fix instead of the suggested ones (repeatable), e.g. "
        "--fix torch.num_workers=4,torch.pin_memory",
    )
    parser.add_argument(
        "--allow-reorder",
        action="store_true",
        help="also try tf.data map(deterministic=False): elements may come in another order",
    )
    parser.add_argument(
        "--allow-batch-size",
        action="store_true",
        help="also try a 2x larger batch on a host-bound job (compared per sample; it changes "
        "the optimisation: scale the learning rate with it)",
    )
    parser.add_argument(
        "--allow-precision",
        action="store_true",
        help="also try Keras' mixed_float16 policy on a GPU-bound job (it changes the numerics)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    parser.add_argument(
        "--keep",
        metavar="DIR",
        help="keep each run's recording and output in DIR (default: a temporary folder, removed)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from gpuwhy.report.try_report import to_dict, write_text
    from gpuwhy.runtime.child import resolve_command
    from gpuwhy.tryout.candidates import parse_fix
    from gpuwhy.tryout.session import TrySession
    from gpuwhy.tryout.workdir import changed, listing

    command = job_command(args.command, "try")
    budget = _budget(args)
    if not 1 <= args.rounds <= MAX_ROUNDS:
        raise UsageError(f"try: --rounds {args.rounds}: out of range", f"give 1 to {MAX_ROUNDS}")
    allowed = [flag for flag in OPT_IN if getattr(args, flag[2:].replace("-", "_"))]
    forced = [parse_fix(text, allowed) for text in args.fix]
    json_path = Path(args.json) if args.json else None
    if json_path is not None and not json_path.parent.is_dir():
        raise UsageError(f"try: --json {args.json}: no such folder", "create it first")
    _refuse_distributed(command)
    resolve_command(command, os.environ)  # SpawnError (127/126) before anything runs
    keep = Path(args.keep) if args.keep else None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    folder = keep or Path(tempfile.mkdtemp(prefix="gpuwhy-try-"))
    cwd = Path.cwd()
    before, _ = listing(cwd, skip=folder)
    stderr = sys.stderr
    own = {str(json_path.resolve())} if json_path is not None else set()
    try:
        session = TrySession(
            command,
            budget,
            args.rounds,
            folder,
            allowed=allowed,
            forced=forced,
            progress=lambda text: print(f"gpuwhy try: {text}", file=stderr, flush=True),
        )
        try:
            report = session.run()
        finally:
            after, _ = listing(cwd, skip=folder)
            wrote = [p for p in changed(before, after) if str(cwd / p) not in own]
        write_text(report, sys.stdout, wrote=wrote)
        if json_path is not None:
            json_path.write_text(json.dumps(to_dict(report, wrote=wrote), indent=2) + "\n")
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


def _budget(args: argparse.Namespace) -> Any:
    from gpuwhy.tryout.trial import Budget

    if args.steps < 10:
        raise UsageError(f"try: --steps {args.steps}: too few", "give at least 10 batches a run")
    if args.skip < 0:
        raise UsageError(f"try: --skip {args.skip}: negative", "give 0 or more warm-up batches")
    time_s = float(args.time)
    if not math.isfinite(time_s) or time_s < 0:
        raise UsageError(f"try: --time {args.time:g}: out of range", "give seconds ≥ 0")
    return Budget(steps=args.steps, skip=args.skip, time_s=time_s or None)


def _refuse_distributed(command: list[str]) -> None:
    from gpuwhy.tryout.session import CannotTryError

    launcher = os.path.basename(command[0])
    module = command[command.index("-m") + 1] if "-m" in command[:-1] else ""
    world = os.environ.get("WORLD_SIZE", "1")
    if launcher in LAUNCHERS or module.startswith("torch.distributed") or world not in ("", "1"):
        raise CannotTryError(
            "try: a distributed launch cannot be restarted safely run after run",
            "try one process of it alone (python train.py) — docs/try.md",
        )
