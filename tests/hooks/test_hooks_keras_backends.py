"""Keras 3 on its JAX and torch backends (one subprocess each: the backend is fixed per process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

JOB = Path(__file__).with_name("keras_backend_job.py")
SRC = Path(__file__).resolve().parents[2] / "src"


def run_job(backend: str, *args: str) -> dict[str, object]:
    env = dict(
        os.environ,
        KERAS_BACKEND=backend,
        TF_CPP_MIN_LOG_LEVEL="3",
        PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    )
    done = subprocess.run(
        [sys.executable, str(JOB), *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def kinds(result: dict[str, object]) -> Counter[tuple[str, str]]:
    return Counter((s[0], s[1]) for s in result["spans"])  # type: ignore[attr-defined, index]


def durations_ms(result: dict[str, object], phase: str, kind: str) -> list[float]:
    spans = sorted(
        (s for s in result["spans"] if s[0] == phase and s[1] == kind),  # type: ignore[attr-defined]
        key=lambda s: s[2],
    )
    return [(s[3] - s[2]) / 1e6 for s in spans]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_fit_and_predict_emit_phases_steps_and_waits(backend: str) -> None:
    pytest.importorskip(backend)
    result = run_job(backend, "1", "0.01")
    assert result["backend"] == backend
    counts = kinds(result)
    assert counts[("train", "STEP")] == counts[("train", "WAIT")] == 12  # 2 epochs x 6
    assert counts[("validation", "STEP")] == counts[("validation", "WAIT")] == 4
    assert counts[("predict", "STEP")] == counts[("predict", "WAIT")] == 3
    assert counts[("train", "PHASE")] == 3  # split around the two validations
    assert not [e for e in result["events"] if e[0] == "hook"]  # type: ignore[attr-defined]
    # Its three PyDatasets (fit's, validation's, predict's), each described once, as Keras
    # loads them: one worker, no processes, so in the loop.
    inputs = result["inputs"]
    assert len(inputs) == 3, inputs  # type: ignore[arg-type]
    for described in inputs:  # type: ignore[attr-defined]
        assert described["source"] == "PyDataset" and described["workers"] == 1
        assert described["multiprocessing"] is False
    waits = durations_ms(result, "train", "WAIT")
    steps = durations_ms(result, "train", "STEP")
    assert all(0 <= w <= s for w, s in zip(waits, steps, strict=True))
    # Every batch takes 10 ms to load, a step computes well under that: in the second epoch
    # (past start-up and compilation) most of each step is waiting.
    assert sum(waits[6:]) >= 0.5 * sum(steps[6:])


@pytest.mark.slow
def test_jax_steps_per_execution_spans_cover_their_steps() -> None:
    pytest.importorskip("jax")
    result = run_job("jax", "4", "0.002")
    train = sorted(
        (s for s in result["spans"] if s[0] == "train" and s[1] == "STEP"),  # type: ignore[attr-defined]
        key=lambda s: s[2],
    )
    assert [s[5] for s in train] == [4, 2, 4, 2]  # 6 batches per epoch, 4 per execution


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_results_are_the_same_with_and_without_hooks(backend: str) -> None:
    pytest.importorskip(backend)
    hooked = run_job(backend, "1", "0")
    plain = run_job(backend, "1", "0", "plain")
    assert hooked["loss"] == plain["loss"]
    assert hooked["weights"] == plain["weights"]
