"""A step's hooks cost mostly Python calls: among a step's work each costs ~0.75-1.1 µs
(docs/performance.md, "A profile function's call among a step's work"), so the calls a step
makes are its cost's budget. Counted, not timed: the count does not move with the machine's
load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # trains a Keras model on JAX

JOB = Path(__file__).with_name("calls_per_step_job.py")

# Measured on Keras 3.15 over JAX 0.10 (2026-12-03), hooks installed before Keras's import as
# `gpuwhy run` installs them: 18 calls a step, and one more where a pull finds the step still
# running (a second readiness check). Before the begin, pull and compiled-step paths were cut:
# 38.
MOST_CALLS_A_STEP = 19


def test_a_keras_on_jax_step_makes_few_gpuwhy_calls_on_the_training_thread() -> None:
    pytest.importorskip("jax")
    pytest.importorskip("keras")
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    done = subprocess.run(
        [sys.executable, str(JOB)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    calls = found["calls"]
    # The hooks ran on every step: its batch-begin hook, its pull and its readiness check.
    for name in ("KerasSpans._begin", "timed_next", "OutputFinder.__call__"):
        assert calls.get(name, 0) >= 300, (name, calls)
    print(f"\n{found['per_step']:.1f} gpuwhy calls a step: {calls}")
    assert found["per_step"] <= MOST_CALLS_A_STEP, calls
