"""GPU truth: record every GPU scenario under `gpuwhy run` with its measured truth, in one archive.

On a machine with an NVIDIA GPU (PyTorch and JAX with CUDA; no TensorFlow needed), each scenario
of bench/gpu_scenarios.py runs its slow and its fixed variant alternately under `gpuwhy run`
(the order swapped every pair), then once more with the framework's profiler on the slow
variant, and for the scenarios a trace finding names, once each under `gpuwhy run --profile`,
whose kernel traces make real slow/fixed pairs for the trace findings. Each job times itself
(bench/gpu_jobs/jobkit.py), so the truth gpuwhy is later checked against — the speed-up of the
fix, the share of time the fix removes — never comes from gpuwhy.
Part 3 adds `gpuwhy doctor --save`, the repository's `gpu`-marked tests, the sampler's cost with
NVML at 10 Hz and the overhead of `gpuwhy run` on the healthy job (bench/overhead.py).

    python bench/gpu_truth.py capture --out DIR [--part 1|2|3|all] [--pairs 3] [--dry-run]
                                      [--only NAME ...] [--budget-s 520]
    python bench/gpu_truth.py unpack ARCHIVE... [--dest tests/data/gpu]
    python bench/gpu_truth.py list

DIR receives `gpu-truth-part<N>.tar.xz` (at most 16 MiB: the largest profiler traces are left
out first if it would not fit, and the manifest says so) and `manifest-part<N>.json` (machine,
driver, CUDA, GPU, framework versions, date, commit, every run's command, exit code and wall
time). `unpack` puts the archives of one capture into tests/data/gpu/<date>-<gpu>/ with a
provenance README. `--dry-run` runs the same suite on a CPU with tiny sizes and one pair: CI
runs it, so the kit cannot break unnoticed. The time plan per part is in bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NoReturn

import gpu_archive
import gpu_machine
from gpu_scenarios import BY_NAME, DRY_PROFILED, PARTS, SCENARIOS, Scenario

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ARCHIVE_LIMIT_BYTES = 16 * 2**20  # what one file back from the GPU machine may weigh
RUN_TIMEOUT_S = {"gpu": 150, "tiny": 90}
FIRST_GUESS_S = {"gpu": 25.0, "tiny": 8.0}  # a run's time before one has been measured
OVERHEAD_PAIR_S = 18.0  # one overhead pair (the healthy job bare, then under gpuwhy), H200
# The PyTorch scenarios whose slow variant a trace finding names (INPUT_BOUND, LAUNCH_BOUND,
# SYNC_BOUND, PAGEABLE_COPY): each also runs slow and fixed under `gpuwhy run --profile`. The
# dry run keeps the first, so CI exercises the path.
WINDOW_SCENARIOS = ("torch_loader", "tiny_batch", "item_sync", "pageable_copy")


EXTRAS = ("doctor", "pytest-gpu", "sampler_cost", "overhead", "try-torch_loader")
"""Part 3's runs beside the scenarios, each nameable in `--only` (a part too long for one
command of the GPU machine is taken in two)."""


class KitUsage(Exception):
    """A bad command line or input file: one line, exit 2."""


class Capture:
    """One part's runs: where they go, what they cost, what the manifest says of them."""

    def __init__(self, work: Path, size: str, budget_s: float) -> None:
        self.work = work
        self.size = size
        self.deadline = time.monotonic() + budget_s
        self.runs: list[dict[str, Any]] = []
        self.skipped: list[str] = []
        self.wanted: set[str] | None = None  # the extras `--only` names; None: every run
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join(
            filter(None, (str(ROOT / "src"), os.environ.get("PYTHONPATH")))
        )
        self.env["GPUWHY_CACHE_DIR"] = str(work / ".cache")
        self.env["PYTHONUNBUFFERED"] = "1"

    def portable(self, parts: list[str]) -> list[str]:
        """A command as the manifest shows it: the repository and work folder by name."""
        return [
            p.replace(sys.executable, "python")
            .replace(str(self.work), "<work>")
            .replace(str(ROOT), "<repo>")
            for p in parts
        ]

    def run(
        self,
        name: str,
        command: list[str],
        env: dict[str, str] | None = None,
        estimate_s: float | None = None,
        cwd: Path | None = None,
        ok_codes: tuple[int, ...] = (0,),
        timeout_s: float | None = None,
    ) -> dict[str, Any] | None:
        """Run a command (None if the budget cannot fit it); its record in the manifest.
        `ok_codes`: the exit codes that mean it did its work (doctor exits 1 on findings);
        `timeout_s`: for a command of several runs (default: one run's limit)."""
        if self.wanted is not None and name not in self.wanted:
            return None
        guess = estimate_s if estimate_s is not None else FIRST_GUESS_S[self.size]
        if time.monotonic() + guess > self.deadline:
            self.skipped.append(name)
            return None
        log = self.work / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        with log.open("w") as out:
            try:
                done = subprocess.run(
                    command,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env={**self.env, **(env or {})},
                    cwd=cwd or self.work,
                    timeout=timeout_s or RUN_TIMEOUT_S[self.size],
                    check=False,
                )
                code: int | str = done.returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        record = {
            "name": name,
            "command": self.portable(command),
            "env": env or {},
            "exit_code": code,
            "ok": code in ok_codes,
            "wall_s": round(time.perf_counter() - started, 3),
            "log": str(log.relative_to(self.work)),
        }
        if not record["ok"]:
            record["log_tail"] = log.read_text(errors="replace")[-1500:]
        self.runs.append(record)
        return record


def _under_gpuwhy(
    capture: Capture,
    scenario: Scenario,
    label: str,
    job_args: list[str],
    run_args: tuple[str, ...] = (),
) -> dict[str, Any] | None:
    folder = capture.work / scenario.name
    folder.mkdir(exist_ok=True)
    py = sys.executable
    command = [
        py,
        "-m",
        "gpuwhy",
        "run",
        "--quiet",
        "--record",
        str(folder / f"{label}.gpuwhy.db"),
        "--json",
        str(folder / f"{label}.report.json"),
        *run_args,
        "--",
        py,
        str(scenario.script),
        "--size",
        capture.size,
        "--truth",
        str(folder / f"{label}.truth.json"),
        *job_args,
    ]
    earlier = [r["wall_s"] for r in capture.runs if r["name"].startswith(scenario.name + "/")]
    return capture.run(
        f"{scenario.name}/{label}", command, scenario.env, max(earlier) if earlier else None
    )


def run_scenario(capture: Capture, scenario: Scenario, pairs: int) -> None:
    for pair in range(pairs):
        order = ("slow", "fixed") if pair % 2 == 0 else ("fixed", "slow")
        for variant in order:
            extra = ["--fixed"] if variant == "fixed" else []
            _under_gpuwhy(capture, scenario, f"{variant}-{pair}", extra)
    windowed = WINDOW_SCENARIOS if capture.size == "gpu" else WINDOW_SCENARIOS[:1]
    if scenario.name in windowed:
        # gpuwhy's own zero-code window on both variants: a real slow/fixed pair of kernel traces
        # for the trace findings' speed-ups (docs/traces.md).
        for variant in ("slow", "fixed"):
            extra = ["--fixed"] if variant == "fixed" else []
            _under_gpuwhy(capture, scenario, f"window-{variant}", extra, ("--profile", "5"))
    if not scenario.profiler or (capture.size != "gpu" and scenario.name not in DRY_PROFILED):
        return
    suffix = ".trace.json.gz" if scenario.framework == "torch" else ".profile.zip"
    _under_gpuwhy(
        capture,
        scenario,
        "profiled",
        ["--profile", str(capture.work / scenario.name / f"profile{suffix}")],
    )


def run_extras(capture: Capture, dry_run: bool, pairs: int) -> None:
    """Part 3: the machine's facts, the gpu-marked tests, the sampler's and gpuwhy's cost."""
    py = sys.executable
    extras = capture.work / "extras"
    extras.mkdir(exist_ok=True)
    capture.run(
        "doctor",
        [py, "-m", "gpuwhy", "doctor", "--save", str(extras / "doctor.json")],
        ok_codes=(0, 1),
    )
    # That machine has no TensorFlow: test modules that need it fail to import, the rest run.
    capture.run(
        "pytest-gpu",
        [
            py,
            "-m",
            "pytest",
            "-m",
            "gpu",
            "-q",
            "-p",
            "no:cacheprovider",
            "--continue-on-collection-errors",
            "--junitxml",
            str(extras / "pytest-gpu.xml"),
            # A dry run checks the path on one module of GPU tests (collecting the whole
            # suite takes a CPU machine a quarter of a minute); the capture runs them all.
            str(ROOT / "tests" / "telemetry" / "test_nvml_live.py" if dry_run else ROOT / "tests"),
        ],
        cwd=ROOT,
        estimate_s=60 if not dry_run else 30,
    )
    seconds = "2" if dry_run else "10"
    capture.run(
        "sampler_cost",
        [
            py,
            str(HERE / "sampler_cost.py"),
            "--seconds",
            seconds,
            "--out",
            str(extras / "sampler_cost.md"),
        ],
        cwd=ROOT,
        estimate_s=10 if dry_run else 90,
    )
    overhead_pairs = 1 if dry_run else max(pairs, 10)
    overhead = (
        ["--pairs", "1", "--batches", "10", "--epochs", "1"]
        if dry_run
        else ["--pairs", str(overhead_pairs)]
    )
    # Ten pairs outran one run's limit (2026-11-29): the limit is one run's per job run.
    pair_s = 8 if dry_run else OVERHEAD_PAIR_S
    capture.run(
        "overhead",
        [
            py,
            str(HERE / "overhead.py"),
            "--jobs",
            "torch",
            *overhead,
            "--out",
            str(extras / "overhead.md"),
        ],
        cwd=ROOT,
        estimate_s=overhead_pairs * pair_s + 20,
        timeout_s=2 * overhead_pairs * RUN_TIMEOUT_S[capture.size],
    )


# `gpuwhy try` on the GPU (docs/try.md): the fix of torch_loader's --fixed variant, applied
# in-process, against the scenario's own slow/fixed pairs (its truth, part 1). The other
# scenarios' fixes are code no setting reaches (a tensor sliced by hand, a sync removed).
TRY_RUNS = (
    (
        "torch_loader",
        "torch.num_workers=8,torch.pin_memory,torch.persistent_workers,torch.prefetch_factor=4",
        3,
    ),
)


def run_tries(capture: Capture, dry_run: bool) -> None:
    """Part 3: `gpuwhy try --fix` on the scenarios of TRY_RUNS, its JSON kept in extras/."""
    py = sys.executable
    budget = ["--skip", "5", "--steps", "20"] if dry_run else ["--skip", "10", "--steps", "50"]
    for name, fix, rounds in TRY_RUNS:
        scenario = BY_NAME[name]
        if dry_run:
            fix = fix.replace("num_workers=8", "num_workers=2")  # the tiny preset's workers
        runs = 1 + 2 * (1 if dry_run else rounds)
        capture.run(
            f"try-{name}",
            [
                py,
                "-m",
                "gpuwhy",
                "try",
                "--fix",
                fix,
                "--rounds",
                "1" if dry_run else str(rounds),
                *budget,
                "--json",
                str(capture.work / "extras" / f"try-{name}.json"),
                "--",
                py,
                str(scenario.script),
                "--size",
                capture.size,
            ],
            scenario.env,
            estimate_s=runs * FIRST_GUESS_S[capture.size],
            timeout_s=runs * RUN_TIMEOUT_S[capture.size],
        )


def truths(work: Path, scenario: Scenario) -> dict[str, Any]:
    """The measured truth of a scenario from its jobs' own timings: medians over the pairs."""
    import json

    folder = work / scenario.name
    speedups, walls, shares = [], [], []
    pair = 0
    while (folder / f"slow-{pair}.truth.json").exists() or (
        folder / f"fixed-{pair}.truth.json"
    ).exists():
        slow, fixed = (folder / f"{v}-{pair}.truth.json" for v in ("slow", "fixed"))
        if slow.exists() and fixed.exists():
            a, b = json.loads(slow.read_text()), json.loads(fixed.read_text())
            train_a, train_b = a["phases_s"].get("train"), b["phases_s"].get("train")
            if train_a and train_b:
                speedups.append(train_a / train_b)
                shares.append(max(0.0, 1 - train_b / train_a))
            walls.append(sum(a["phases_s"].values()) / max(sum(b["phases_s"].values()), 1e-9))
        pair += 1

    def median(xs):
        return round(statistics.median(xs), 4) if xs else None

    return {
        "pairs": len(speedups),
        "train_speedup": median(speedups),
        "train_speedups": [round(x, 4) for x in speedups],
        "job_speedup": median(walls),
        "removed_share": median(shares),
    }


def capture_part(
    out: Path, part: str, size: str, pairs: int, only: list[str], budget_s: float
) -> int:
    numbers = PARTS if part == "all" else (int(part),)
    chosen = [s for s in SCENARIOS if s.part in numbers and (not only or s.name in only)]
    extras = [name for name in only if name in EXTRAS]
    work = Path(tempfile.mkdtemp(prefix="gpu-truth-"))
    (work / ".cache").mkdir()
    capture = Capture(work, size, budget_s)
    started = dt.datetime.now(dt.timezone.utc)
    # Fills gpuwhy's probe cache, so that no timed run pays for the environment probe.
    capture.run(
        "warm-up",
        [
            sys.executable,
            "-m",
            "gpuwhy",
            "run",
            "--quiet",
            "--record",
            str(work / ".cache" / "warm-up.gpuwhy.db"),
            "--",
            sys.executable,
            "-c",
            "pass",
        ],
    )
    for scenario in chosen:
        run_scenario(capture, scenario, pairs)
    if 3 in numbers and (not only or extras):
        capture.wanted = set(extras) if extras else None
        run_extras(capture, size == "tiny", pairs)
        run_tries(capture, size == "tiny")
    manifest = {
        "kind": "gpuwhy.gpu-truth",
        "part": part,
        "size": size,
        "pairs": pairs,
        "started": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": gpu_machine.facts(sys.executable, capture.env),
        "commit": gpu_machine.commit(ROOT),
        "scenarios": {
            s.name: {
                "job": s.job,
                "proves": s.proves,
                "expected": s.expected,
                "framework": s.framework,
                "env": s.env,
                "truth": truths(work, s),
            }
            for s in chosen
        },
        "runs": capture.runs,
        "skipped_for_time": capture.skipped,
    }
    out.mkdir(parents=True, exist_ok=True)
    archive = gpu_archive.pack(work, manifest, out, f"part{part}", ARCHIVE_LIMIT_BYTES)
    shutil.rmtree(work, ignore_errors=True)
    failed = [r["name"] for r in capture.runs if not r["ok"]]
    print(
        f"{archive} ({archive.stat().st_size / 2**20:.1f} MiB): {len(capture.runs)} runs, "
        f"{len(failed)} failed{': ' + ', '.join(failed) if failed else ''}"
        f"{'; skipped for time: ' + ', '.join(capture.skipped) if capture.skipped else ''}"
    )
    return 0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise KitUsage(f"{message} (see --help)")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(
        prog="gpu_truth.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)
    take = verbs.add_parser("capture", help="run the scenarios and pack an archive")
    take.add_argument("--out", type=Path, required=True, help="folder for archive + manifest")
    take.add_argument("--part", choices=[*map(str, PARTS), "all"], default="all")
    take.add_argument("--pairs", type=int, default=3, help="slow/fixed pairs per scenario")
    take.add_argument(
        "--dry-run",
        action="store_true",
        help="tiny sizes on the CPU, one pair unless --pairs is given",
    )
    take.add_argument(
        "--only",
        nargs="+",
        default=[],
        metavar="NAME",
        help="only these scenarios or part 3's extras (names from 'list')",
    )
    take.add_argument(
        "--budget-s",
        type=float,
        default=520.0,
        help="start no run that would end after this many seconds",
    )
    unpack = verbs.add_parser("unpack", help="unpack archives into the test data")
    unpack.add_argument("archives", nargs="+", type=Path)
    unpack.add_argument("--dest", type=Path, default=ROOT / "tests" / "data" / "gpu")
    verbs.add_parser("list", help="the scenarios, their part and what each proves")
    args = parser.parse_args(argv)
    if args.verb == "capture":
        if "--pairs" not in argv and args.dry_run:
            args.pairs = 1
        if args.pairs < 1:
            raise KitUsage("--pairs must be at least 1")
        unknown = [name for name in args.only if name not in BY_NAME and name not in EXTRAS]
        if unknown:
            known = ", ".join([*BY_NAME, *EXTRAS])
            raise KitUsage(f"unknown scenario {', '.join(unknown)}; known: {known}")
    return args


def main(argv: list[str]) -> int:
    try:
        args = parse(argv)
        if args.verb == "list":
            for s in SCENARIOS:
                print(f"{s.name:16} part {s.part}  {s.proves}")
            for name in EXTRAS:
                print(f"{name:16} part 3  (extra)")
            return 0
        if args.verb == "unpack":
            for folder in gpu_archive.unpack(args.archives, args.dest):
                print(folder)
            return 0
        return capture_part(
            args.out,
            args.part,
            "tiny" if args.dry_run else "gpu",
            args.pairs,
            args.only,
            args.budget_s,
        )
    except (KitUsage, gpu_archive.ArchiveError) as error:
        print(f"gpu_truth.py: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
