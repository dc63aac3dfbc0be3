"""Side by side with Holistic Trace Analysis on the same real traces: gpuwhy's temporal breakdown
(idle / compute / non-compute over HTA's window) agrees with HTA's within 2 points.

HTA's numbers were computed by HTA 0.5.0 itself (bench/hta_side_by_side.py, which rewrites
tests/data/traces/hta_expected.json); this test reads them, it does not need HTA installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwhy.analysis.kernels.breakdown import temporal, without_last_step
from gpuwhy.traces import load_traces

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
EXPECTED = json.loads((DATA / "hta_expected.json").read_text())
POINTS = 2.0
CASES = [
    (name, rank)
    for name, entry in EXPECTED["traces"].items()
    for rank, numbers in (entry.get("ranks") or {}).items()
    if "idle_time_pctg" in (numbers.get("temporal_breakdown") or {})
]


def test_hta_numbers_cover_the_traces() -> None:
    assert EXPECTED["hta_version"].startswith("0.5")
    assert len(CASES) >= 12, CASES


@pytest.mark.parametrize(("name", "rank"), CASES, ids=[f"{n}:{r}" for n, r in CASES])
def test_temporal_breakdown_agrees_with_hta(name: str, rank: str) -> None:
    hta = EXPECTED["traces"][name]["ranks"][rank]["temporal_breakdown"]
    traces = load_traces(str(DATA / name))
    trace = traces[0] if len(traces) == 1 else next(t for t in traces if str(t.rank) == rank)
    ours = temporal(trace, without_last_step(trace))
    assert ours is not None
    shares = ours.shares()
    assert abs(100 * shares["idle"] - hta["idle_time_pctg"]) <= POINTS, (shares, hta)
    assert abs(100 * shares["compute"] - hta["compute_time_pctg"]) <= POINTS, (shares, hta)
    assert abs(100 * shares["non_compute"] - hta["non_compute_time_pctg"]) <= POINTS


def test_a_rank_without_gpu_work_has_no_breakdown_for_either() -> None:
    name = "hta/cpu_only_rank34.pt.trace.json.gz"
    hta = EXPECTED["traces"][name]["ranks"]["34"]["temporal_breakdown"]
    assert "idle_time_pctg" not in hta  # HTA fails on it (its error is recorded)
    (trace,) = load_traces(str(DATA / name))
    assert temporal(trace, without_last_step(trace)) is None
