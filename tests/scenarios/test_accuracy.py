"""Scenario suite: real training scripts with a known pathology, diagnosed under `gpuwhy run`.

Each script in scripts/ runs twice as a real subprocess of `python -m gpuwhy run`: as written (the
pathology) and with `--fast` (the fix its what-if models). Ground truth is measured, never
assumed: true speed-up = slow wall / fast wall (the recorded run durations, both under the same
conditions); true wait fraction = 1 − fast/slow, over the whole run and over the training
phase's steady steps (docs/findings.md, "Steady steps and one-time work").
Targets (docs/findings.md, "How speed-ups are estimated"): the right primary finding; speed-up
estimates within 25 % of measured; wait fractions within 0.1; no runtime finding at all on the
healthy control.
A scenario that misses is measured once more (a busy machine can delay one run's start-up by
seconds); it fails if the second measurement misses too. The table records the attempt, and
the run's summary lists every scenario measured again with what its first attempt missed.

Set GPUWHY_ACCURACY_OUT=path.md to write the accuracy table there.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE / "scripts"
ROOT = HERE.parents[1]
SPEEDUP_TOLERANCE = 0.25
WAIT_TOLERANCE = 0.10
pytestmark = [pytest.mark.slow, pytest.mark.timing]


@dataclass(frozen=True)
class Scenario:
    script: str
    expected: (
        str | None
    )  # the primary finding's code; None: the control, no problem (hints at most)
    phase: str = "train"
    # Run by itself (the `alone` pass): a fixed variant of a few seconds, most of them start-up,
    # against a slow one of tens; beside another timing test the two runs of a pair met
    # different loads (a truth of 7.18x where the pair before and after read 3.8-4.3x).
    alone: bool = False


SCENARIOS = [
    Scenario("keras_tf_slow_map.py", "INPUT_BOUND"),
    Scenario("tf_tape_slow_generator.py", "INPUT_BOUND"),
    Scenario("torch_slow_dataloader.py", "INPUT_BOUND"),
    Scenario("keras_torch_slow_pydataset.py", "INPUT_BOUND"),
    Scenario("keras_tf_slow_validation.py", "SLOW_VALIDATION"),
    Scenario("torch_worker_restart.py", "ONE_TIME_WORK"),
    Scenario("tf_tape_retrace.py", "ONE_TIME_WORK", alone=True),
    Scenario("jax_recompile.py", "ONE_TIME_WORK", alone=True),
    Scenario("torch_recompile.py", "ONE_TIME_WORK"),
    Scenario("keras_tf_healthy.py", None),
]
ROWS: list[dict[str, Any]] = []


@pytest.fixture(scope="module")
def probe_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One environment-probe cache for every run of the suite, filled before the first run.

    `gpuwhy run` probes the job's frameworks beside it unless its cache holds the answer; with
    a cold cache for one variant and a warm one for the other, the comparison would measure the
    probe, not the fix.
    """
    from gpuwhy.env import collect_facts
    from gpuwhy.env.probe_cache import ProbeCache

    directory = tmp_path_factory.mktemp("probe-cache")
    facts = collect_facts(sys.executable, cache=ProbeCache(directory))
    assert facts["frameworks"], "no framework was probed"
    return directory


def _record(script: str, tmp: Path, cache: Path, *extra: str) -> dict[str, Any]:
    name = Path(script).stem + ("-fast" if extra else "")
    record, report = tmp / f"{name}.gpuwhy.db", tmp / f"{name}.json"
    command = [
        sys.executable,
        "-m",
        "gpuwhy",
        "run",
        "--quiet",
        "--record",
        str(record),
        "--json",
        str(report),
        "--",
        sys.executable,
        str(SCRIPTS / script),
        *extra,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "GPUWHY_CACHE_DIR": str(cache)}
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=tmp, env=env, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(report.read_text())
    return result


def _wait_s(report: dict[str, Any]) -> float:
    wait = report["phases"].get("data_wait")
    return float(wait["time_s"]) if wait else 0.0


def _compare(scenario: Scenario, slow: dict[str, Any], fast: dict[str, Any]) -> dict[str, Any]:
    """The estimate against the measured truth, and what misses the targets."""
    top = slow["findings"][0] if slow["findings"] else {}
    measured = slow["duration_s"] / fast["duration_s"]
    slow_phase, fast_phase = slow["phases"].get(scenario.phase), fast["phases"].get(scenario.phase)
    row = {
        "scenario": scenario.script,
        "expected": scenario.expected,
        "got": top.get("code", "none"),
        "estimate": top.get("speedup"),
        "measured": measured,
        "wait": _wait_s(slow) / slow["duration_s"],
        "true_wait": 1 - fast["duration_s"] / slow["duration_s"],
        "phase_wait": slow_phase["data_wait_fraction"] if slow_phase else None,
        # The phase's figures describe its steady steps (one-time work apart): so does the truth.
        "true_phase_wait": (
            1 - fast_phase["steady_time_s"] / slow_phase["steady_time_s"]
            if slow_phase and fast_phase and slow_phase["steady_time_s"]
            else None
        ),
    }
    if scenario.expected != "INPUT_BOUND":  # wait fractions say nothing about the others
        row.update(wait=None, true_wait=None, phase_wait=None, true_phase_wait=None)
    misses = []
    if row["got"] != scenario.expected:
        misses.append(f"primary finding {row['got']}, expected {scenario.expected}")
    estimate = row["estimate"] or 0.0
    if abs(estimate / measured - 1) > SPEEDUP_TOLERANCE:
        misses.append(f"speed-up {estimate:.2f} vs measured {measured:.2f}")
    if scenario.expected == "INPUT_BOUND":
        for key in ("wait", "phase_wait"):
            true = row[f"true_{key}"]
            if row[key] is None or true is None or abs(row[key] - true) > WAIT_TOLERANCE:
                misses.append(f"{key} {row[key]} vs true {true}")
    row["misses"] = misses
    return row


@pytest.mark.parametrize(
    "scenario",
    [pytest.param(s, marks=pytest.mark.alone) if s.alone else s for s in SCENARIOS],
    ids=lambda s: s.script.removesuffix(".py"),
)
def test_scenario(
    scenario: Scenario, tmp_path: Path, probe_cache: Path, record_property: Any
) -> None:
    if scenario.expected is None:
        control = _record(scenario.script, tmp_path, probe_cache)
        codes = [f["code"] for f in control["findings"]]
        ROWS.append(
            {
                "scenario": scenario.script,
                "expected": "none",
                "got": ", ".join(codes) or "none",
                "misses": [],
            }
        )
        # A healthy job has no problem: nothing above a hint, and no hint promises a speed-up
        # (a short job's start-up is reported as an info ONE_TIME_WORK without an estimate).
        problems = [f for f in control["findings"] if f["severity"] != "info" or f["speedup"]]
        assert problems == [], codes
        return
    # Two attempts: a run that another process on the machine slowed at start-up moves the
    # measured truth by seconds. A real error of the estimate misses both times.
    for attempt in (1, 2):
        where = tmp_path / f"attempt{attempt}"
        where.mkdir()
        slow = _record(scenario.script, where, probe_cache)
        fast = _record(scenario.script, where, probe_cache, "--fast")
        assert slow["environment"]["facts"]["collected"]["frameworks_cached"]
        assert fast["environment"]["facts"]["collected"]["frameworks_cached"]
        row = _compare(scenario, slow, fast)
        row["attempt"] = attempt
        if not row["misses"]:
            break
        if attempt == 1:  # listed at the end of the run (tests/conftest.py): seen, not hidden
            record_property("retried", "; ".join(row["misses"]))
    ROWS.append(row)
    assert not row["misses"], row["misses"]


def _fmt(value: float | None, pattern: str) -> str:
    return "–" if value is None else format(value, pattern)


@pytest.fixture(scope="module", autouse=True)
def accuracy_table() -> Any:
    yield
    lines = [
        "| scenario | expected | got | est. speed-up | measured | run wait | true | "
        "train wait | true | attempt | misses |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in ROWS:
        lines.append(
            f"| {row['scenario']} | {row['expected']} | {row['got']} | "
            f"{_fmt(row.get('estimate'), '.2f')} | {_fmt(row.get('measured'), '.2f')} | "
            f"{_fmt(row.get('wait'), '.2f')} | {_fmt(row.get('true_wait'), '.2f')} | "
            f"{_fmt(row.get('phase_wait'), '.2f')} | {_fmt(row.get('true_phase_wait'), '.2f')} | "
            f"{row.get('attempt', 1)} | {'; '.join(row['misses']) or '–'} |"
        )
    table = "\n".join(lines) + "\n"
    print("\n" + table)
    out = os.environ.get("GPUWHY_ACCURACY_OUT")
    if out:
        when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        head = (
            f"# Scenario accuracy\n\n- Date: {when}\n- Machine: {platform.node()}, "
            f"{os.cpu_count()} CPU cores, {platform.platform()}\n- Command: "
            "`GPUWHY_ACCURACY_OUT=bench/results/accuracy.md pytest tests/scenarios`\n"
            "- est. speed-up: the primary finding's what-if; measured: slow / fast run "
            "duration; run wait: data wait / run duration vs true 1 − fast/slow; train "
            "wait: the phase's data-wait fraction vs 1 − fast/slow steady train time.\n\n"
        )
        Path(out).write_text(head + table, encoding="utf-8")
