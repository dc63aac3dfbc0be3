"""gpuwhy against the real-GPU truth: every committed capture (tests/data/gpu/<date>-<gpu>/)
replayed through today's analysis, scenario by scenario, beside the truth the jobs measured
(one section a capture).

For each scenario's slow runs: the finding gpuwhy leads with, and the seconds its speed-up says
the fix saves (run − run / speed-up) beside the seconds the fix took out of the train (and
validation) phase in that run's pair (the jobs' own timers); for its fixed runs, what gpuwhy
still says. The NVML sampler's cost measured on that machine follows (extras/sampler_cost.md).
Writes
bench/results/gpu_capture.md; tests/analysis/test_gpu_capture.py holds the same numbers to
their tolerances.

    python bench/gpu_replay.py [--capture tests/data/gpu/2026-11-26-nvidia-h200 ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from gpu_scenarios import SCENARIOS

from gpuwhy.analysis.diagnose import Diagnosis, diagnose
from gpuwhy.model import Finding
from gpuwhy.recording import Recording

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CAPTURES = ROOT / "tests" / "data" / "gpu"


def _diagnosed(path: Path) -> Diagnosis:
    with Recording.open(path) as recording:
        return diagnose(recording)


def _truth(folder: Path, run: str) -> dict[str, Any]:
    return json.loads((folder / f"{run}.truth.json").read_text())


def _pairs(folder: Path) -> list[tuple[str, str]]:
    slow = sorted(p.name.split(".")[0] for p in folder.glob("slow-*.truth.json"))
    return [(s, s.replace("slow", "fixed")) for s in slow if (folder / f"{s}.gpuwhy.db").exists()]


def saved_by_fix(folder: Path, slow: str) -> float:
    """Seconds the fix removed from the phases the job timed (train, and validation where it
    has one) in the slow run's pair (the jobs' timers)."""
    fixed = slow.replace("slow", "fixed")
    return _timed_s(folder, slow) - _timed_s(folder, fixed)


TIMED_PHASES = ("train", "validation")
"""The phases a fix is held to; a job's warm-up (a Keras warm-up `fit`) or idle tail is not."""


def _timed_s(folder: Path, run: str) -> float:
    phases = _truth(folder, run)["phases_s"]
    return float(sum(phases.get(name, 0.0) for name in TIMED_PHASES))


def saved_estimate(diagnosis: Diagnosis, finding: Finding) -> float:
    """Seconds a finding's whole-run speed-up says the fix saves: run − run / speed-up."""
    assert finding.speedup is not None and finding.speedup > 1
    return diagnosis.duration_s * (1 - 1 / finding.speedup)


def _codes(diagnosis: Diagnosis) -> str:
    return ", ".join(f.code for f in diagnosis.findings) or "none"


def scenario_row(folder: Path, expected: str | None) -> str:
    pairs = _pairs(folder)
    slow = {s: _diagnosed(folder / f"{s}.gpuwhy.db") for s, _ in pairs}
    fixed = {f: _diagnosed(folder / f"{f}.gpuwhy.db") for _, f in pairs}
    leads = sorted({d.findings[0].code if d.findings else "none" for d in slow.values()})
    estimates, truths = [], []
    for s, _ in pairs:
        truths.append(saved_by_fix(folder, s))
        lead = slow[s].findings[0] if slow[s].findings else None
        if lead is not None and lead.speedup and lead.speedup > 1:
            estimates.append(saved_estimate(slow[s], lead))
    estimate = f"{statistics.median(estimates):.2f} s" if estimates else "—"
    truth = statistics.median(truths)
    ratio = f"{statistics.median(estimates) / truth:.2f}" if estimates and truth > 0 else "—"
    still = sorted({_codes(d) for d in fixed.values()})
    return (
        f"| `{folder.name}` | {expected or '—'} | {' / '.join(leads)} | {len(pairs)} | "
        f"{estimate} | {truth:.2f} s | {ratio} | {' / '.join(still)} |"
    )


def capture_section(capture: Path) -> list[str]:
    """One capture's table (and the sampler's cost on its machine, where it was measured)."""
    manifests = [json.loads(p.read_text()) for p in sorted(capture.glob("manifest-*.json"))]
    # What each scenario should get: today's kit's word (gpu_scenarios.py), else the capture's.
    expected = {n: s["expected"] for m in manifests for n, s in m["scenarios"].items()}
    expected.update({s.name: s.expected for s in SCENARIOS if s.name in expected})
    machine = manifests[0]["machine"]
    gpu = machine["gpus"][0]
    lines = [
        f"## {gpu['name']}, {str(manifests[0]['started'])[:10]}",
        "",
        f"Replayed with `python bench/gpu_replay.py` from `{capture.relative_to(ROOT)}` "
        f"(driver {gpu['driver_version']}, {machine['cpu_count']} CPUs; how it was captured: "
        "its README.md). *Lead*: the finding gpuwhy puts first on the slow runs today. "
        "*Saved, gpuwhy*: run − run / speed-up of that finding, median over the slow runs. "
        "*Saved, truth*: the slow run's train (and validation) phase less its pair's fixed one "
        "(the jobs' own "
        "timers), median over the pairs. Whole-run ratios are not compared: the runs' start-up "
        "(Python, the framework, CUDA: 7–10 s) varies by ±2 s between runs of the same variant.",
        "",
        "| scenario | should say | lead | pairs | saved, gpuwhy | saved, truth "
        "| gpuwhy / truth | fixed runs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for folder in sorted(p for p in capture.iterdir() if p.is_dir() and p.name != "extras"):
        if _pairs(folder):
            lines.append(scenario_row(folder, expected.get(folder.name)))
    cost = capture / "extras" / "sampler_cost.md"
    if cost.exists():
        table = [line for line in cost.read_text().splitlines() if line.startswith("|")]
        lines += ["", "### The sampler's cost with NVML on that machine", "", *table]
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--capture", type=Path, action="append", help="a capture folder (default: every one)"
    )
    parser.add_argument("--out", type=Path, default=HERE / "results" / "gpu_capture.md")
    args = parser.parse_args(argv)
    captures = args.capture or (
        sorted(p for p in CAPTURES.iterdir() if p.is_dir()) if CAPTURES.is_dir() else []
    )
    if not captures:
        parser.error(f"no capture folder in {CAPTURES}: unpack one (bench/README.md)")
    for capture in captures:
        if not capture.is_dir():
            parser.error(f"no capture folder at {capture}: unpack one (bench/README.md)")
    lines = ["# On a real GPU: the committed captures replayed against their measured truth", ""]
    for capture in captures:
        lines += capture_section(capture)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
