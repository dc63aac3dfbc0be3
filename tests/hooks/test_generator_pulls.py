"""A plain loop's own generator, timed through `sys.monitoring` (generator_pulls.py): real loops
run by a Python 3.12 interpreter (generator_loops.py), their steps bounded by the call a torch
optimizer step or a JAX train step makes; and before 3.12 (legacy_reads.py,
legacy_generator.py), by Python 3.10. The zoo runs real Flax, JAX and torch loops the same
way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from analysis.constructed import phase_stats
from gpuwhy.hooks import legacy_generator, tracker
from gpuwhy.model import Span, SpanKind
from support import ROOT, framework_env

JOB = Path(__file__).resolve().parent / "generator_loops.py"
READ_MS, COMPUTE_MS, BATCHES, EPOCHS = 5.0, 2.0, 10, 2  # generator_loops.py's
STEPS = BATCHES * EPOCHS - 1  # optimizer steps bound the steps: the last one never ends
# Reads found in the second step (the first one to end without a timed read), timed from the
# third: every later step has its read.
TIMED = STEPS - 2
# Before 3.12 a generator's watch is kept only after a trial of three whole steps.
TIMED_AFTER_TRIAL = TIMED - legacy_generator.TRIAL_STEPS


def run_loops(
    shape: str, environment: str = "py312-jax"
) -> tuple[list[tuple[str, int, int, int]], list[int]]:
    """(the spans the loop's hooks delivered, the monitoring tool ids gpuwhy holds at the end)."""
    result = run_job(shape, framework_env(environment))
    return [tuple(s) for s in result["spans"]], result["held"]  # type: ignore[misc]


def run_job(shape: str, python: Path | str, read_ms: float = READ_MS) -> dict[str, Any]:
    """generator_loops.py's JSON line: spans, events' kinds, tool ids held, profile left on."""
    done = subprocess.run(
        [str(python), str(JOB), shape, str(read_ms)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
        check=False,
    )
    assert done.returncode == 0 and not done.stderr, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


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
        _inside_before_compute(step, wait)


def _inside_before_compute(
    step: tuple[str, int, int, int], wait: tuple[str, int, int, int]
) -> None:
    assert step[1] <= wait[1] and wait[2] + COMPUTE_MS * 1e6 <= step[2], (step, wait)


SHAPES = [
    pytest.param(shape, "py312-jax", id=shape)
    for shape in ("loop", "wrapped", "thread", "counted", "stepwise", "class", "class-stepwise")
]
# The newest Python here: its bytecode and sys.monitoring change from one version to the next.
SHAPES += [
    pytest.param(shape, "py313-jax", id=f"{shape}-3.13")
    for shape in ("loop", "wrapped", "stepwise", "class")
]


@pytest.mark.parametrize(("shape", "environment"), SHAPES)
def test_each_read_of_the_loop_s_generator_is_a_wait_of_its_step(
    shape: str, environment: str
) -> None:
    # wrapped: a progress bar's generator around the input; the loop resumes the outer one,
    # which reads the inner one. thread: another thread reads the same generator function
    # (slower) at the same time, and none of its reads is the loop's. counted: the loop also
    # sums a generator expression each step, which is no input. stepwise: `next(iterator)`.
    # class: an iterator class's `__next__` reads each batch (by `for`, by `next()`).
    spans, held = run_loops(shape, environment)
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
    # Three reads of four: a sleep never ends early, so that wait holds three reads at least
    # and begins a read or more into its step (the step's first read was not timed), and it
    # ends before the step's compute. A load on the machine can only lengthen a read: bounded
    # by the full steps' wait instead, one stall in pass 1 read 6.3 ms against their 5.3.
    first, step = waits[0], steps[-TIMED - 1]
    assert _ms(first) >= 0.75 * READ_MS, _ms(first)
    assert first[1] - step[1] >= READ_MS / 4 * 1e6, (step, first)
    _inside_before_compute(step, first)


def test_two_optimizer_steps_on_each_batch_are_one_step_that_waits_once() -> None:
    # A GAN's loop: the discriminator's and the generator's optimizer step on each batch. Once
    # its reads are timed, a step is a batch: its read and both optimizer steps (before, each
    # optimizer step ends one). The share is the one the loop measured of its own reads.
    result = run_job("gan", framework_env("py312-jax"))
    spans = [tuple(s) for s in result["spans"]]
    steps, waits = _of(spans, "STEP"), _of(spans, "WAIT")
    timed = [s for s in steps if s[1] <= waits[0][1]][-1:] + [
        s for s in steps if s[1] > waits[0][1]
    ]
    assert len(timed) == len(waits) >= BATCHES and len(steps) < 2 * BATCHES * EPOCHS - BATCHES
    for step, wait in zip(timed, waits, strict=True):
        _inside_before_compute(step, wait)
    assert all(_ms(s) >= READ_MS + 2 * COMPUTE_MS for s in timed[1:]), [_ms(s) for s in timed]
    recorded = [Span("train", SpanKind[kind], a, b, steps=n) for kind, a, b, n in spans]
    train = phase_stats(recorded, spans[0][1], spans[-1][2])["train"]
    truth = result["truth"]  # READ_MS / (READ_MS + 2 COMPUTE_MS) by construction: ~0.56
    assert train.data_wait_fraction == pytest.approx(truth, abs=0.05), (truth, train)


def test_steps_that_read_nothing_after_the_loop_s_reads_are_steps_again() -> None:
    # Ten batches read (the first two untimed), then 20 optimizer steps on a batch the job
    # holds: the first OPTIMIZER_STEPS_A_BATCH of them are taken as the last batch's, as a
    # GAN's would be; the rest are steps of their own.
    spans, _ = run_loops("held")
    steps, waits = _of(spans, "STEP"), _of(spans, "WAIT")
    assert len(waits) == BATCHES - 2
    assert len(steps) == BATCHES - 1 + 20 - tracker.OPTIMIZER_STEPS_A_BATCH, len(steps)


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


def _pythons_before_3_12() -> list[Any]:
    """The oldest Python gpuwhy supports (its test environment), and this one if before 3.12."""
    pythons: list[Any] = [pytest.param("py310-jax", id="3.10")]
    if sys.version_info < (3, 12):
        pythons.append(pytest.param(sys.executable, id="this"))
    return pythons


def _python(name: str) -> str:
    return name if os.sep in name else str(framework_env(name))


@pytest.mark.parametrize("python", _pythons_before_3_12())
@pytest.mark.parametrize("shape", ["class", "class-stepwise"])
def test_before_3_12_an_iterator_class_s_reads_are_timed(shape: str, python: str) -> None:
    """No sys.monitoring: the loop thread's profile function finds the class, whose own
    `__next__` is then patched to time the loop's reads; the profile function is gone."""
    result = run_job(shape, _python(python))
    spans = [tuple(s) for s in result["spans"]]
    steps, waits = _of(spans, "STEP"), _of(spans, "WAIT")  # type: ignore[arg-type]
    assert len(steps) == STEPS and len(waits) == TIMED, [_ms(w) for w in waits]
    _covers_the_reads_only(steps[-TIMED:], waits)
    # The class found is the loop's input, described once (input_pipelines.py).
    assert result["profiled"] is False and result["events"] == ["input"]


@pytest.mark.parametrize("python", _pythons_before_3_12())
@pytest.mark.parametrize("shape", ["loop", "stepwise", "wrapped"])
def test_before_3_12_a_generator_s_reads_are_timed_where_that_costs_little(
    shape: str, python: str
) -> None:
    """The loop thread's profile function, kept after its trial: ~60 calls a step of 22 ms, well
    inside the 1 % budget (steps of 7 ms come near it on Python 3.10)."""
    result = run_job(shape, _python(python), read_ms=4 * READ_MS)
    spans = [tuple(s) for s in result["spans"]]
    steps, waits = _of(spans, "STEP"), _of(spans, "WAIT")  # type: ignore[arg-type]
    assert len(steps) == STEPS and len(waits) == TIMED_AFTER_TRIAL, [_ms(w) for w in waits]
    _covers_the_reads_only(steps[-TIMED_AFTER_TRIAL:], waits)
    assert result["events"] == ["input"] and result["profiled"] is True


@pytest.mark.parametrize("python", _pythons_before_3_12())
def test_before_3_12_a_costly_watch_is_removed_and_the_report_says_what_it_would_cost(
    python: str,
) -> None:
    # Steps of 0.3-0.4 ms making ~8,000 Python and C calls each: watching costs more than them.
    result = run_job("costly", _python(python))
    spans = [tuple(s) for s in result["spans"]]
    assert len(_of(spans, "STEP")) == STEPS and not _of(spans, "WAIT")  # type: ignore[arg-type]
    assert result["events"] == ["data_wait_unavailable"] and result["profiled"] is False
    (reason,) = result["reasons"]
    assert "would cost" in reason and "gpuwhy.iterate(...)" in reason, reason


@pytest.mark.timing  # beside the parallel pass's trainings more than half of the trial's
# 0.1 ms steps stalled once, and the watch was kept (2026-12-02): a quieter pass's test
@pytest.mark.parametrize("python", _pythons_before_3_12())
def test_before_3_12_a_stall_in_the_trial_keeps_no_costly_watch(python: str) -> None:
    # Steps of ~0.1 ms whose watch would cost a large share of each, and one stall of 30 ms
    # among the trial's: their mean step says "cheap", their mean without the longest does not,
    # and more steps show the stall for what it was.
    result = run_job("stalled", _python(python))
    assert not _of([tuple(s) for s in result["spans"]], "WAIT")  # type: ignore[arg-type]
    assert result["events"] == ["data_wait_unavailable"] and result["profiled"] is False
    (reason,) = result["reasons"]
    assert "would cost" in reason, reason


@pytest.mark.parametrize("python", _pythons_before_3_12())
@pytest.mark.parametrize(
    ("shape", "said", "profiled"),
    [
        # the job sets its own profile function during the trial: it stays, and ours goes
        pytest.param("own-profiler", "profiler of its own", True, id="own-profiler"),
        # a loop of four steps ends before the trial does
        pytest.param("brief", "the job ended before", False, id="brief"),
    ],
)
def test_before_3_12_a_trial_cut_short_says_the_wait_is_unknown_and_why(
    shape: str, said: str, profiled: bool, python: str
) -> None:
    result = run_job(shape, _python(python))
    assert not _of([tuple(s) for s in result["spans"]], "WAIT")  # type: ignore[arg-type]
    assert result["events"] == ["data_wait_unavailable"] and result["profiled"] is profiled
    (reason,) = result["reasons"]
    assert said in reason, reason


@pytest.mark.parametrize("python", _pythons_before_3_12())
def test_before_3_12_the_job_s_own_profiler_is_left_alone(python: str) -> None:
    result = run_job("taken", _python(python))  # a profile function set before the loop
    assert not _of([tuple(s) for s in result["spans"]], "WAIT")  # type: ignore[arg-type]
    assert result["profiled"] is True and result["events"] == []


@pytest.mark.parametrize("python", _pythons_before_3_12())
def test_before_3_12_a_loop_over_a_list_is_left_alone(python: str) -> None:
    result = run_job("list", _python(python))
    assert not _of([tuple(s) for s in result["spans"]], "WAIT")  # type: ignore[arg-type]
    assert result["profiled"] is False and result["events"] == []
