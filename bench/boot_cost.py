"""What gpuwhy adds to a job's start-up: a framework's import, bare and under `gpuwhy run`.

Under `gpuwhy run` the job's first import of a watched framework loads gpuwhy's hooks, connects
to the run's socket and patches the framework, all inside that import; nothing else in the job
waits for gpuwhy. So a child imports one framework and times that import with its own clock, run
bare (`python -c`), as `gpuwhy run --quiet -- python -c`, and so with `GPUWHY_BOOT=0` (no hooks:
only what `gpuwhy run` does beside the job, its environment probe and sampler, which share the
machine's cores with the job's start), in rounds of the three (the order rotated every round)
after one of each. Reported per framework: the bare import's median; the medians of the
per-round differences gpuwhy − bare (all it adds) and gpuwhy − gpuwhy without hooks (the
hooks' own part), with the first's range; and the `gpuwhy` modules the hooks loaded.

A short job pays this once: on the zoo's few-second jobs it is most of what gpuwhy adds to the
job's own time (bench/zoo_overhead.py).

    python bench/boot_cost.py [--pairs 10] [--frameworks torch tensorflow jax] [--out FILE]

(`--pairs`: rounds of the three runs.)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import machine
from one_line_args import OneLineParser

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "boot_cost.md"
FRAMEWORKS = ("torch", "tensorflow", "jax")
MAX_PAIRS = 200
MARK = "BOOT "  # the child's line: this, then its JSON
CHILD = (
    "import sys, time, json\n"
    "start = time.perf_counter()\n"
    "import {framework}\n"
    "took = time.perf_counter() - start\n"
    "mods = sorted(m for m in sys.modules if m == 'gpuwhy' or m.startswith('gpuwhy.'))\n"
    "print({mark!r} + json.dumps({{'s': took, 'modules': mods}}), flush=True)\n"
)


VARIANTS = ("bare", "hooked", "unhooked")  # unhooked: under `gpuwhy run`, GPUWHY_BOOT=0


def _import_once(framework: str, variant: str, folder: Path) -> dict[str, object]:
    """One child's import of `framework`: its seconds and the gpuwhy modules it loaded."""
    code = CHILD.format(framework=framework, mark=MARK)
    command = [sys.executable, "-c", code]
    env = dict(os.environ)
    env.pop("GPUWHY_BOOT", None)
    if variant != "bare":
        command = [sys.executable, "-m", "gpuwhy", "run", "--quiet", "--", *command]
    if variant == "unhooked":
        env["GPUWHY_BOOT"] = "0"
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=folder, env=env, timeout=300, check=False
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith(MARK)), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"boot_cost: {framework} child failed: {done.stderr.strip()[-500:]}")
    result: dict[str, object] = json.loads(line[len(MARK) :])
    return result


def measure(framework: str, rounds: int) -> dict[str, object]:
    """The three variants' imports in rounds, the order rotated every round, after one of each
    (not kept)."""
    with tempfile.TemporaryDirectory(prefix="gpuwhy-boot-") as tmp:
        folder = Path(tmp)
        for variant in VARIANTS:
            _import_once(framework, variant, folder)
        bare: list[float] = []
        added: list[float] = []
        hooks: list[float] = []
        modules: list[str] = []
        for number in range(rounds):
            timed = {}
            shift = number % len(VARIANTS)
            for variant in VARIANTS[shift:] + VARIANTS[:shift]:
                result = _import_once(framework, variant, folder)
                timed[variant] = float(result["s"])  # type: ignore[arg-type]
                if variant == "hooked":
                    modules = list(result["modules"])  # type: ignore[call-overload]
            bare.append(timed["bare"])
            added.append(timed["hooked"] - timed["bare"])
            hooks.append(timed["hooked"] - timed["unhooked"])
    return {
        "framework": framework,
        "pairs": rounds,
        "bare_s": statistics.median(bare),
        "added_ms": statistics.median(added) * 1e3,
        "added_min_ms": min(added) * 1e3,
        "added_max_ms": max(added) * 1e3,
        "hooks_ms": statistics.median(hooks) * 1e3,
        "modules": len(modules),
        "hook_modules": sorted(m.removeprefix("gpuwhy.hooks.") for m in modules if ".hooks." in m),
    }


def document(rows: list[dict[str, object]], args: argparse.Namespace) -> str:
    lines = [
        "# gpuwhy's cost at a job's start-up",
        "",
        f"- Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {machine.describe()}",
        f"- Command: `python bench/boot_cost.py --pairs {args.pairs} "
        f"--frameworks {' '.join(args.frameworks)}`",
        "- Method: a child imports the framework and times the import itself, run bare, under "
        "`gpuwhy run --quiet` (the import holds gpuwhy's hooks loading, the socket's connection "
        "and the patches) and so with `GPUWHY_BOOT=0` (no hooks: gpuwhy's probe and sampler "
        "beside the job's start, on the same cores), in rounds of the three, the order rotated "
        "every round, after one of each. Medians over rounds of the per-round differences.",
        "",
        "| framework | rounds | bare import s | added ms (median) | added ms (min – max) "
        "| of it the hooks' ms | gpuwhy modules loaded | hook modules |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['framework']} | {row['pairs']} | {row['bare_s']:.3f} "
            f"| {row['added_ms']:.1f} | {row['added_min_ms']:.1f} – {row['added_max_ms']:.1f} "
            f"| {row['hooks_ms']:.1f} | {row['modules']} "
            f"| {', '.join(row['hook_modules'])} |"  # type: ignore[arg-type]
        )
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10, help=f"1 to {MAX_PAIRS}")
    parser.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS, default=list(FRAMEWORKS))
    parser.add_argument("--out", type=Path, help=f"default {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    if not 1 <= args.pairs <= MAX_PAIRS:
        parser.error(f"--pairs must be 1 to {MAX_PAIRS}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    rows = []
    for framework in args.frameworks:
        row = measure(framework, args.pairs)
        print(
            f"{framework}: bare {row['bare_s']:.3f} s, gpuwhy adds {row['added_ms']:.1f} ms, "
            f"its hooks {row['hooks_ms']:.1f} ms ({row['modules']} gpuwhy modules)",
            flush=True,
        )
        rows.append(row)
    out = args.out or RESULTS
    out.write_text(document(rows, args))
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
