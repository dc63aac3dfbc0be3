"""A committed real-GPU capture (tests/data/gpu/<date>-<gpu>, its README says how it was made)
replayed through today's analysis, beside the truth its jobs measured themselves
(`*.truth.json`: their own phase timers, never gpuwhy's)."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

from gpuwhy.analysis.diagnose import Diagnosis, diagnose
from gpuwhy.model import Finding, Severity
from gpuwhy.recording import Recording

from . import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import gpu_replay

TOLERANCE = 0.20  # an estimate within 20 % of the measured truth


class Capture:
    """One capture folder: its runs, what gpuwhy says of each, and what each job measured."""

    def __init__(self, name: str) -> None:
        self.folder = ROOT / "tests" / "data" / "gpu" / name

    def recordings_of(self, gpu: str, capability: tuple[int, int]) -> int:
        """Checks that each recording's one GPU is `gpu` and that NVML saw the job on it; how
        many recordings there are."""
        recordings = sorted(self.folder.glob("*/*.gpuwhy.db"))
        for path in recordings:
            diagnosis = self.diagnosed(path.parent.name, path.name.split(".")[0])
            (device,) = diagnosis.devices
            assert device.info.name == gpu and device.info.compute_capability == capability
            assert device.samples >= 20, path  # 10 Hz polling over runs of 5-20 s
            assert device.job_seen, path  # NVML listed the job's process on the GPU
        return len(recordings)

    def diagnosed(self, scenario: str, run: str) -> Diagnosis:
        return _diagnosed(self.folder / scenario / f"{run}.gpuwhy.db")

    def truth(self, scenario: str, run: str) -> dict[str, Any]:
        facts: dict[str, Any] = json.loads(
            (self.folder / scenario / f"{run}.truth.json").read_text()
        )
        return facts

    def runs(self, scenario: str, variant: str) -> list[str]:
        """The alternated pairs' runs of one variant (slow-0, slow-1, ...), in pair order."""
        names = (
            p.name.split(".")[0] for p in (self.folder / scenario).glob(f"{variant}-*.truth.json")
        )
        return sorted(n for n in names if n.split("-")[1].isdigit())

    def train_s(self, scenario: str, run: str) -> float:
        return float(self.truth(scenario, run)["phases_s"]["train"])

    def saved_by_fix(self, scenario: str, slow: str) -> float:
        """Seconds of the train (and validation) phase the fix removed in the slow run's pair."""
        return gpu_replay.saved_by_fix(self.folder / scenario, slow)


@functools.cache
def _diagnosed(path: Path) -> Diagnosis:
    with Recording.open(path) as recording:
        return diagnose(recording)


def codes(diagnosis: Diagnosis) -> list[str]:
    return [f.code for f in diagnosis.findings]


def finding(diagnosis: Diagnosis, code: str) -> Finding:
    return next(f for f in diagnosis.findings if f.code == code)


def warnings(diagnosis: Diagnosis) -> list[str]:
    return [f.code for f in diagnosis.findings if f.severity is not Severity.INFO]
