"""`gpuwhy try` on real jobs: the job's own outputs are left alone, a compute-bound job gains
nothing, the suggested fixes of a bundled example are found and combined, an input it cannot
change is refused."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from support import ROOT
from support.trying import TRY_JOB as JOB
from support.trying import gpuwhy_try

# The tests that compare speeds run alone (`timing`); those that check files and refusals do not.
pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("loop", "fix", "checkpoint"),
    [
        ("torch", "torch.num_workers=2", "checkpoint.pt"),
        ("keras", "tf.parallel_map", "checkpoint.weights.h5"),
        ("tape", "tf.parallel_map", "checkpoint.weights.h5"),
    ],
)
def test_the_jobs_outputs_are_untouched(
    loop: str, fix: str, checkpoint: str, tmp_path: Path
) -> None:
    pytest.importorskip("torch" if loop == "torch" else "tensorflow")
    out = tmp_path / "out"
    out.mkdir()
    kept = {out / checkpoint: b"the full run's checkpoint", out / "result.txt": b"final\n"}
    for path, content in kept.items():
        path.write_bytes(content)
        os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    # 5 + 40 batches: past the first epoch's end (40 batches), where the job saves.
    done = gpuwhy_try(
        [
            "--fix",
            fix,
            "--rounds",
            "1",
            "--skip",
            "5",
            "--steps",
            "40",
            "--",
            sys.executable,
            str(JOB),
            "--loop",
            loop,
            "--out",
            "out",
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for path, content in kept.items():
        assert path.read_bytes() == content, path
        assert path.stat().st_mtime_ns == 1_000_000_000, path
    assert sorted(p.name for p in out.iterdir()) == sorted([checkpoint, "log.txt", "result.txt"])
    assert "model saves per run" in done.stdout
    assert "the job wrote to its working directory during the runs: out/log.txt" in done.stdout


@pytest.mark.timing
def test_a_compute_bound_job_has_nothing_to_gain(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    report = tmp_path / "try.json"
    budget = ["--skip", "5", "--steps", "30", "--json", str(report)]
    job = [sys.executable, str(JOB), "--loop", "keras", "--healthy"]
    done = gpuwhy_try([*budget, "--", *job], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(report.read_text())
    assert "INPUT_BOUND" not in result["findings"] and result["fixes"] == []
    assert result["best"] is None and result["nothing_to_gain"]
    assert done.stdout.splitlines()[2].startswith("nothing to gain: ")


@pytest.mark.timing
def test_a_fix_that_cannot_help_is_not_called_a_win(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    report = tmp_path / "try.json"
    # 5 rounds: with 3, a test machine busy with other tests leans one way by luck too often.
    fix = ["--fix", "torch.num_workers=2", "--rounds", "5"]
    budget = ["--skip", "5", "--steps", "30", "--json", str(report)]
    job = [sys.executable, str(JOB), "--loop", "torch", "--healthy"]
    done = gpuwhy_try([*fix, *budget, "--", *job], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(report.read_text())
    (row,) = result["fixes"]
    assert row["verdict"] != "faster" and row["gain"] is False, row
    assert result["best"] is None
    assert "no fix was measurably faster" in done.stdout


@pytest.mark.timing
def test_the_bundled_example_gets_its_fix_found_and_combined(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    report = tmp_path / "try.json"
    done = gpuwhy_try(
        [
            "--rounds",
            "1",
            "--json",
            str(report),
            "--",
            sys.executable,
            str(ROOT / "examples" / "torch_slow_loader.py"),
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(report.read_text())
    assert result["findings"][0] == "INPUT_BOUND"
    names = [row["name"] for row in result["fixes"]]
    assert "torch.num_workers=2" in names and "torch.num_workers=4" in names, names
    combined = [row for row in result["fixes"] if row["combined"]]
    assert combined and combined[0]["settings"]["torch.persistent_workers"] is True
    assert result["best"] is not None
    assert any(
        "torch_slow_loader.py:" in line for row in result["fixes"] for line in row["changes"]
    )


def test_an_iterable_dataset_is_refused_not_repeated(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    job = tmp_path / "stream.py"
    job.write_text(
        textwrap.dedent("""
        import time, torch
        from torch.utils.data import DataLoader, IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                for _ in range(60):
                    time.sleep(0.01)
                    yield torch.randn(8, 4)

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in DataLoader(Stream(), batch_size=None):
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    """)
    )
    done = gpuwhy_try(["--skip", "5", "--steps", "20", "--", sys.executable, str(job)], tmp_path)
    assert done.returncode == 5, done.stderr[-3000:]
    assert done.stdout == ""
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("gpuwhy: try: INPUT_BOUND, but the input is an IterableDataset"), last


@pytest.mark.timing
def test_mixed_precision_is_applied_and_measured_like_any_fix(tmp_path: Path) -> None:
    """Opt-in, and here on a CPU, whose float16 is no faster: measured, never assumed a win."""
    pytest.importorskip("tensorflow")
    report = tmp_path / "try.json"
    fix = ["--fix", "keras.mixed_precision", "--allow-precision", "--rounds", "1"]
    # A step count and no time cap: emulated float16 is slow on some CPUs, and a cap would leave
    # too few batches to measure there. A small batch keeps the slow emulated float16 steps
    # short (the test took 75 s at the job's batch of 64); the verdict needs only that it is no win.
    budget = ["--skip", "5", "--steps", "12", "--time", "0", "--json", str(report)]
    job = [sys.executable, str(JOB), "--loop", "keras", "--healthy", "--batch", "16"]
    done = gpuwhy_try([*fix, *budget, "--", *job], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json.loads(report.read_text())["fixes"]
    assert row["verdict"] in ("slower", "no measurable change"), row
    assert row["opt_in"] == ["--allow-precision"] and row["measured_speedup"] < 1.05
