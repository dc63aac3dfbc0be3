"""A plain loop's own generator, timed through `sys.monitoring` (generator_pulls.py): real loops
run by a Python 3.12 interpreter (generator_loops.py), their steps bounded by the call a torch
optimizer step or a JAX train step makes. The zoo runs a real Flax loop the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuwhy.hooks import generator_pulls, tracker
from support import ROOT, framework_env

JOB = Path(__file__).resolve().parent / "generator_loops.py"
READ_MS, COMPUTE_MS, BATCHES, EPOCHS = 5.0, 2.0, 10, 2  # generator_loops.py's
STEPS = BATCHES * EPOCHS - 1  # optimizer steps bound the steps: the last one never ends
# Reads found in the second step (the first one to end without a timed read), timed from the
# third: every later step has its read.
TIMED = STEPS - 2


def run_loops(shape: str) -> tuple[list[tuple[str, int, int, int]], list[int]]:
    """(the spans the loop's hooks delivered, the monitoring tool ids gpuwhy holds at the end)."""
    python = framework_env("py312-jax")
    done = subprocess.run(
        [str(python), str(JOB), shape],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
        check=False,
    )
    assert done.returncode == 0 and not done.stderr, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return [tuple(s) for s in result["spans"]], result["held"]  # type: ignore[misc]


def _of(spans: list[tuple[str, int, int, int]], kind: str) -> list[tuple[str, int, int, int]]:
    return [s for s in spans if s[0] == kind]


def _ms(span: tuple[str, int, int, int]) -> float:
    return (span[2] - span[1]) / 1e6


def _covers_the_reads_only(
    steps: list[tuple[str, int, int, int]], waits: list[tuple[str, int, int, int]]
) -> None:
    """Each wait holds its step's reads (READ_MS of sleep at least) and none of its compute:
    it ends before the step's last COMPUTE_MS (a bound no load on the machine can move)."""
    for step, wait in zip(steps, waits, strict=True):
        assert _ms(wait) >= READ_MS, _ms(wait)
        assert step[1] <= wait[1] and wait[2] + COMPUTE_MS * 1e6 <= step[2], (step, wait)


@pytest.mark.parametrize(
    "shape", ["loop", "wrapped", "thread", "counted", "stepwise", "class", "class-stepwise"]
)
def test_each_read_of_the_loop_s_generator_is_a_wait_of_its_step(shape: str) -> None:
    # wrapped: a progress bar's generator around the input; the loop resumes the outer one,
    # which reads the inner one. thread: another thread reads the same generator function
    # (slower) at the same time, and none of its reads is the loop's. counted: the loop also
    # sums a generator expression each step, which is no input. stepwise: `next(iterator)`.
    # class: an iterator class's `__next__` reads each batch (by `for`, by `next()`).
    spans, held = run_loops(shape)
    steps, waits = _of(spans, "STEP"), _of(spans, "WAIT")
    assert len(steps) == STEPS and all(s[3] == 1 for s in steps)  # reads count no steps
    assert len(waits) == TIMED and all(w[3] == 1 for w in waits), [_ms(w) for w in waits]
    _covers_the_reads_only(steps[-TIMED:], waits)
    assert held == [4]  # the generator's code stays watched while the job lives


def test_a_step_reading_several_batches_is_still_one_step() -> None:
    # Gradient accumulation: four reads of 1.25 ms per optimizer step, one wait of 5 ms.
    spans, _ = run_loops("accumulate")
    steps, waits = _of(spans, "STEP"), _of(spans, "WAIT")
    assert len(steps) == STEPS and all(s[3] == 1 for s in steps)
    assert all(w[3] == 1 for w in waits)
    full = waits[1:]  # the first timed step had three of its reads timed
    assert len(full) == TIMED, [_ms(w) for w in waits]
    _covers_the_reads_only(steps[-TIMED:], full)
    assert 0.75 * READ_MS <= _ms(waits[0]) < READ_MS


def test_a_loop_that_reads_only_after_some_steps_is_found_later() -> None:
    # Six steps read nothing (the search of three steps finds no generator), then the loop
    # begins: the search comes again after eight more unfed steps and finds it.
    spans, held = run_loops("late")
    steps, waits = _of(spans, "STEP"), _of(spans, "WAIT")
    assert len(steps) == STEPS + 6 and held == [4]
    assert len(waits) >= 8, [_ms(w) for w in waits]
    _covers_the_reads_only(steps[-len(waits) :], waits)


def test_a_loop_over_a_list_is_left_unwatched() -> None:
    spans, held = run_loops("list")
    assert len(_of(spans, "STEP")) == STEPS and not _of(spans, "WAIT")
    assert held == []  # the search ended and gave its tool id back


def test_nothing_is_watched_when_other_tools_hold_the_free_ids() -> None:
    spans, held = run_loops("taken")
    assert len(_of(spans, "STEP")) == STEPS and not _of(spans, "WAIT") and held == []


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.11's behaviour")
def test_python_3_11_has_no_search() -> None:
    before = list(tracker.on_unfed_step)
    generator_pulls.install()
    assert tracker.on_unfed_step == before and not generator_pulls.available()
