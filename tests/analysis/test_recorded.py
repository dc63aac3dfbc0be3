"""diagnose() on real recordings captured on other machines (tests/data/recordings/README.md).

Each recording comes with the finding its situation must produce; GPU recordings (input-starved,
launch-bound, `.item()` every step, model left on the CPU, a saturated healthy run) are captured
on a GPU machine and replayed here, so CI checks the GPU rules on real NVML data.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwhy.analysis import diagnose
from gpuwhy.model import Severity
from gpuwhy.recording import Recording

RECORDINGS = Path(__file__).resolve().parents[1] / "data" / "recordings"
CASES = sorted(RECORDINGS.glob("*.gpuwhy.db"))


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name.removesuffix(".gpuwhy.db"))
def test_captured_recording_gives_its_expected_diagnosis(path: Path) -> None:
    expect = json.loads(
        path.with_name(path.name.removesuffix(".gpuwhy.db") + ".expect.json").read_text(
            encoding="utf-8"
        )
    )
    assert expect.get("provenance"), "a captured recording needs its provenance"
    with Recording.open(path) as recording:
        diagnosis = diagnose(recording)
    codes = [f.code for f in diagnosis.findings]
    if expect["primary"] is None:
        assert [f for f in diagnosis.findings if f.severity is not Severity.INFO] == [], codes
    else:
        assert codes and codes[0] == expect["primary"], codes
    for code in expect.get("codes_absent", []):
        assert code not in codes
    if expect.get("true_speedup") is not None:
        estimate = diagnosis.findings[0].speedup
        assert estimate == pytest.approx(expect["true_speedup"], rel=0.25)
