"""The legacy generator watch's trial (hooks/legacy_generator.py), driven in this process on a
clock of the test's own: its calibration of one profile call runs at the trial's start and
again at its end, the lower figure kept, and counts none of its own calls as the loop's.

In a full run of the suite on a busy machine, the zoo's torch loop over a generator (~620 calls
a step, ~72 ms steps: ~0.4 % of a step to watch) lost its watch on both attempts, where a quiet
machine keeps it: one wall-clock calibration read a call at up to 2.5 times its cost."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from gpuwhy.hooks import input_pipelines, legacy_generator, tracker

STEP_NS = 72_000_000  # the zoo loop's step
CALLS = 300  # C calls a step in the loop below: a call and a return each, 600 profile events


def _batches() -> Iterator[int]:
    yield from range(100)


def _loop(steps: int) -> None:
    """A step: the loop's calls, the clock moved on by a step, the step's boundary."""
    source = _batches()
    size, empty = len, ()
    for _ in range(steps):
        next(source)
        for _ in range(CALLS):
            size(empty)
        _Clock.now += _Clock.step_ns
        legacy_generator.on_boundary()


class _Clock:
    now = 0
    step_ns = STEP_NS


@pytest.fixture
def trial(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Runs a trial to its decision: what it decided ("kept", or why the wait is unknown)."""
    decided: list[str] = []
    _Clock.now, _Clock.step_ns = 0, STEP_NS
    monkeypatch.setattr(tracker, "clock", lambda: _Clock.now)
    monkeypatch.setattr(input_pipelines, "loop_reads", lambda *_: decided.append("kept"))
    monkeypatch.setattr(legacy_generator, "_unknown", decided.append)
    previous = sys.getprofile()
    legacy_generator.start(_batches.__code__, _loop.__code__)
    try:
        yield decided
    finally:
        legacy_generator.stop()
        sys.setprofile(previous)


def _run_trial() -> None:
    _loop(legacy_generator.TRIAL_STEPS + 1)  # the step it was found in, then the trial's


def test_a_calibration_slowed_at_the_trials_start_leaves_an_affordable_watch_on(
    trial: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The start's calibration (the counting function's call, then the watch's) reads four times
    # the cost the end's reads, as a busy machine made it.
    readings = iter([400.0, 400.0, 100.0, 100.0])
    monkeypatch.setattr(legacy_generator, "_call_ns", lambda _profile: next(readings))
    _run_trial()
    assert trial == ["kept"]  # ~600 calls x 100 ns x 4: ~0.3 % of the step, not ~1.3 %


def test_the_calibrations_own_calls_are_not_the_loops(trial: list[str]) -> None:
    _Clock.step_ns = 100_000  # a step too short to watch: the decision says what it counted
    _run_trial()
    (why,) = trial
    calls = float(why.split(": ")[1].split(" Python and C calls")[0])
    # the loop's own, and a few of the step's boundary; its 20,000 calibration calls make ~4,000
    assert 2 * CALLS <= calls < 2 * CALLS + 100, why
