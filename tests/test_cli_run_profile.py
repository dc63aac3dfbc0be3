"""`gpuwhy run --profile`: a real PyTorch job profiled with no code change; its trace read back
and folded into the run's report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from gpuwhy.traces import load_traces
from support import framework_env

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "src" / "gpuwhy" / "schemas" / "report.schema.json").read_text())

_JOB = """
import sys, time, torch
from torch.utils.data import DataLoader, Dataset
torch.set_num_threads(1)
STEPS = int(sys.argv[1])

class Slow(Dataset):
    def __len__(self):
        return 16 * STEPS
    def __getitem__(self, index):
        time.sleep(0.0005)  # a slow read: the steps wait for their data
        return torch.randn(32), index % 10

model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in DataLoader(Slow(), batch_size=16):
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
print("trained", STEPS, "steps")
"""


def _run(tmp_path: Path, *args: str, steps: int) -> tuple[subprocess.CompletedProcess[str], Path]:
    script = tmp_path / "train.py"
    script.write_text(_JOB)
    record = tmp_path / "r.gpuwhy.db"
    python = str(framework_env("torch-cpu"))
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "run", "--record", str(record), *args, "--",
         python, str(script), str(steps)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src"), COLUMNS="120"),
    )  # fmt: skip
    return done, record


@pytest.mark.slow
def test_the_window_is_written_read_and_reported(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    done, _ = _run(tmp_path, "--profile", "3", "--json", str(report), steps=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "trained 30 steps\n"  # the job's own output, untouched
    (trace,) = load_traces(str(tmp_path / "r.gpuwhy.profile"))
    assert [number for number, _, _ in trace.steps] == [1, 2, 3]
    assert len(trace.loader) == 3 and len(trace.optimizer) == 3 and trace.backward_seen
    document = json.loads(report.read_text())
    jsonschema.validate(document, SCHEMA)
    window = document["trace"]["window"]
    assert window["steps"] == 3 and window["skipped_steps"] == 10
    assert window["inside_over_outside"] > 0  # measured from the run's own step spans
    assert "profiler window: 3 steps after the first 10" in done.stderr
    assert "INPUT_BOUND" in {f["code"] for f in document["findings"]}


@pytest.mark.slow
def test_a_job_ending_inside_the_window_keeps_the_steps_it_profiled(tmp_path: Path) -> None:
    # 14 steps: the window opens at the 10th, warms up one step, profiles 3 of the 5 asked.
    done, record = _run(tmp_path, "--profile", steps=14)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "trained 14 steps\n"
    assert "3 steps after the first 10 (of 5 asked: the job ended inside the window)" in (
        done.stderr.replace("\n", " ")
    )
    assert "Traceback" not in done.stderr and record.exists()


@pytest.mark.slow
def test_a_job_too_short_for_the_window_says_so(tmp_path: Path) -> None:
    done, _ = _run(tmp_path, "--profile", steps=4)
    assert done.returncode == 0, done.stderr
    assert "no profiler window was written" in done.stderr
    assert not (tmp_path / "r.gpuwhy.profile").exists()


def test_without_profile_nothing_is_profiled_and_bad_counts_are_refused(tmp_path: Path) -> None:
    from gpuwhy.cli import main

    assert main(["run", "--profile", "0", "--", sys.executable, "-c", "pass"]) == 2
    assert main(["run", "--profile", "1000", "--", sys.executable, "-c", "pass"]) == 2
    from gpuwhy.runtime.child import child_environment

    env = child_environment("/tmp/s", environ={"GPUWHY_PROFILE": "1:2:/x"})
    assert "GPUWHY_PROFILE" not in env  # only a run that asks opens a window
    asked = child_environment("/tmp/s", environ={}, profile=(10, 5, Path("/d")))
    assert asked["GPUWHY_PROFILE"] == "10:5:/d"
