"""Measure what the fix really buys, against what gpuwhy estimated from the slow run alone.

Runs one bundled example under `gpuwhy run --json`, as written and with `--fixed`, alternating
the order from round to round (a busy machine or a cold start then weighs on both), and prints
gpuwhy's estimate beside the measured speed-up, over the whole run and over the training phase:

    python examples/compare_fix.py                          # keras_slow_input.py, 3 rounds
    python examples/compare_fix.py torch_slow_loader.py --rounds 5 --keep runs/

The estimate is the slow run's INPUT_BOUND finding: its data wait removed from the run
(Amdahl, `speedup`), and from the training phase's steady steps (`phase_speedup`: one-time work
such as tracing and starting the input apart). Measured is the median over rounds of slow /
fixed: the run's durations, and the phase's time per steady step.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
EXAMPLES = ("keras_slow_input.py", "tf_custom_loop.py", "torch_slow_loader.py")


def record(example: str, fixed: bool, folder: Path, name: str) -> dict[str, Any]:
    """Run the example under `gpuwhy run --json`; its report as a dict."""
    report = folder / f"{name}.json"
    command = [
        sys.executable,
        "-m",
        "gpuwhy",
        "run",
        "--quiet",
        "--record",
        str(folder / f"{name}.gpuwhy.db"),
        "--json",
        str(report),
        "--",
        sys.executable,
        str(HERE / example),
        *(["--fixed"] if fixed else []),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not report.exists():
        sys.exit(
            f"compare_fix: {' '.join(command[3:])} failed ({done.returncode}):\n"
            f"{done.stderr[-2000:]}"
        )
    result: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return result


def estimates(slow: dict[str, Any]) -> tuple[float, float, str] | None:
    """(whole run, phase, phase name) speed-ups gpuwhy estimated from the slow run."""
    finding = next((f for f in slow["findings"] if f["code"] == "INPUT_BOUND"), None)
    if finding is None or finding.get("speedup") is None:
        return None
    evidence = finding["evidence"]
    return float(finding["speedup"]), float(evidence["phase_speedup"]), str(evidence["phase"])


def steady_step_s(report: dict[str, Any], phase: str) -> float:
    """The phase's time per steady step: what a fix of the input changes. Per step, for the
    runs may not have as many: the fixed run's first epoch, filling its cache, is one-time work
    and none of its steps is steady."""
    stats = report["phases"].get(phase)
    time_s, steps = (stats.get("steady_time_s"), stats.get("steady_steps")) if stats else (0, 0)
    return float(time_s) / steps if time_s and steps else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("example", nargs="?", default=EXAMPLES[0], choices=EXAMPLES)
    parser.add_argument("--rounds", type=int, default=3, help="slow/fixed pairs (default 3)")
    parser.add_argument(
        "--keep",
        metavar="DIR",
        type=Path,
        help="keep the recordings and JSON reports in DIR (ROUND-slow.json...)",
    )
    args = parser.parse_args()
    runs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="gpuwhy-compare-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(max(1, args.rounds)):
            order = (False, True) if index % 2 == 0 else (True, False)
            done = {
                fixed: record(
                    args.example, fixed, folder, f"{index + 1}-{'fixed' if fixed else 'slow'}"
                )
                for fixed in order
            }
            slow, fixed = done[False], done[True]
            runs.append((slow, fixed))
            print(
                f"round {index + 1}: as written {slow['duration_s']:.1f} s, "
                f"--fixed {fixed['duration_s']:.1f} s"
            )
    estimated = [e for e in (estimates(slow) for slow, _ in runs) if e is not None]
    if not estimated:
        print("gpuwhy found no INPUT_BOUND in the slow runs: nothing to compare")
        return 1
    phase = estimated[0][2]
    run_estimate = statistics.median(e[0] for e in estimated)
    phase_estimate = statistics.median(e[1] for e in estimated)
    run_measured = statistics.median(s["duration_s"] / f["duration_s"] for s, f in runs)
    phase_measured = statistics.median(
        steady_step_s(s, phase) / steady_step_s(f, phase) for s, f in runs
    )
    fixed_codes = sorted({f["code"] for _, fixed in runs for f in fixed["findings"]})
    print(
        f"whole run:     gpuwhy estimated {run_estimate:.2f}x faster, measured {run_measured:.2f}x"
    )
    print(
        f"'{phase}' steady steps: gpuwhy estimated {phase_estimate:.2f}x faster, "
        f"measured {phase_measured:.2f}x"
    )
    print(f"findings of the --fixed runs: {', '.join(fixed_codes) or 'none'}")
    print(
        f"gpuwhy estimated {run_estimate:.1f}x — measured {run_measured:.1f}x "
        f"(median of {len(runs)} round{'s' if len(runs) > 1 else ''})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
