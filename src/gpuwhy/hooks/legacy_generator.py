"""A plain loop's own generator before Python 3.12, timed by a profile function on the loop's
thread where that costs little (generator_pulls.py finds the generator and starts this).

Before 3.12 nothing watches one function's code alone: a profile function (`sys.setprofile`)
is called at every Python call and return, and every C call, of its thread. So:

- a trial of ``TRIAL_STEPS`` whole steps counts those calls in the loop's thread (its reads are
  not timed yet), and the cost of one call of the watching function is measured beside a loop
  of C calls run without it, in the thread's CPU time, at the trial's start and again at its
  end (the lower of the two: a busy machine lengthens a measurement, never shortens it); a
  call among a real step's work costs more than in that tight loop (``IN_STEP_FACTOR``);
- where a step's calls cost at most ``BUDGET`` of the step (and no one step decides it:
  ``MAX_TRIAL_STEPS``), the watching function stays on the loop's thread: each resume of the
  generator by the loop, to its next `yield` (or its end), is a read of the open step, as
  `sys.monitoring` times it from 3.12 on. The generator's own calls run under it too, so a read
  reads long by at most that budget;
- else it is removed, and the phase's data wait is reported unknown with what watching would
  have cost and the fix (`gpuwhy.iterate(...)`, or Python 3.12).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from gpuwhy.hooks import emitter, input_pipelines, tracker
from gpuwhy.hooks.iterators import loop_read_delivered, loop_read_requested

TRIAL_STEPS = 5
"""Whole steps whose profile calls are counted before the watch is kept or removed: five, so
that a slow first one (a loop's first step often is: 5–9 ms where the others took 0.16 ms) and
one stall leave their median a typical step."""

BUDGET = 0.01
"""The most of a step the watch may cost: the overhead goal on a compute-bound job
(docs/performance.md)."""

MAX_TRIAL_STEPS = 20
"""A trial goes on, up to this many steps, while its steps' mean and their median disagree on
whether the watch is affordable, then the median decides: a stall of the shared machine
lengthens a step, never shortens one, so it can only make watching look cheap. Three steps of
a tenth of a millisecond, whose watch costs ~36 µs each, look cheap with one stall of ~11 ms
among them (the zoo's Flax loop over in-memory batches kept its watch so once); on a loaded
machine several steps of a trial stall, which the median is blind to while they are fewer than
half. A loop whose steps differ by design (a GAN's long step with the read, its short one
without) agrees once a few more are seen."""

IN_STEP_FACTOR = 4.0
"""What one call of the profile function costs among a step's work (gpuwhy's hooks in it), over
its cost in the calibration's tight loop: 3.8-5.9x on a torch loop (Python 3.11) and 2.4-4.7x on
a JAX one (3.10), median 4.4x, in bench/results/profile_call_cost.md. A watch kept at 1 %
estimated so costs at most ~1.5 %, within the 2 % goal for any job. A trial of a few steps
cannot measure it in the job itself: the CPU time of steps that sleep moves by more than the
calls cost."""

_CALIBRATION_CALLS = 2000  # C calls timed with and without the watch (~0.4 ms a round)
_CALIBRATION_ROUNDS = 5  # rounds of both, alternated (~2 ms in all a calibration)
# The thread's CPU time, where it is exact (Windows counts it in ~15.6 ms ticks: the wall clock)
_CALIBRATION_CLOCK = time.perf_counter_ns if sys.platform == "win32" else time.thread_time_ns
_UNWATCHED = "wrap it in gpuwhy.iterate(...) to time them here, or run Python 3.12 or later"

Profile = Callable[..., object]  # a profile function: (frame, event, arg)


class _Trial:
    def __init__(self, generator: CodeType, loop: CodeType) -> None:
        self.generator, self.loop = generator, loop
        self.thread = threading.get_ident()
        self.events = 0  # profile calls counted since `start_ns`
        self.steps = -1  # step boundaries since the trial began (-1: none yet)
        self.start_ns = 0
        self.last_ns = 0  # the last step boundary's time
        self.durations: list[int] = []  # the trial's steps (ns)
        self.count: Profile | None = None  # the trial's profile function
        self.watch: Profile | None = None  # the one kept, if the trial allows
        # what one call of each costs: the lowest of the calibrations so far (none yet)
        self.count_ns = self.watch_ns = float("inf")


_trial: _Trial | None = None
_token: object | None = None  # the live watch's (a stale profile function removes itself)


def start(generator: CodeType, loop: CodeType) -> None:
    """In the loop's thread, once the search found `generator`, resumed by `loop`'s code:
    count the thread's profile calls for the next whole steps (`on_boundary`)."""
    global _trial, _token
    trial = _trial = _Trial(generator, loop)
    token = _token = object()
    setprofile = sys.setprofile  # held: at exit this module's globals may be gone before it

    def count(frame: FrameType, event: str, arg: Any) -> None:
        if token is not _token:
            setprofile(None)
            return
        trial.events += 1

    trial.count = count
    sys.setprofile(count)


def trying() -> bool:
    """Whether a trial is running (its steps are left to `on_boundary`)."""
    return _trial is not None


def on_boundary() -> None:
    """A step ended in the loop's thread during the trial: at the last, keep or remove."""
    trial = _trial
    if trial is None or threading.get_ident() != trial.thread:
        return
    trial.steps += 1
    if trial.steps == 0:  # the step the generator was found in ends: count whole steps now
        _calibrate(trial)  # here, in a step whose wait is unknown anyway
        trial.events, trial.start_ns = 0, tracker.clock()
        trial.last_ns = trial.start_ns
        return
    now_ns = tracker.clock()
    trial.durations.append(now_ns - trial.last_ns)
    trial.last_ns = now_ns
    if trial.steps < TRIAL_STEPS:
        return
    if trial.steps < MAX_TRIAL_STEPS and sys.getprofile() is trial.count:
        mean = _affordable(*_estimate(trial, now_ns, robust=False)[1:])
        if mean != _affordable(*_estimate(trial, now_ns)[1:]):
            return  # a few steps decide it: more steps tell whether they stalled
    _decide(trial, now_ns)


def stop() -> None:
    """Watch nothing more (the profile function removes itself at its thread's next call)."""
    global _trial, _token
    _trial = _token = None


def job_ended(t: int) -> None:
    """The job ends during the trial: its generator's reads were never timed; say so."""
    trial = _trial
    if trial is not None:
        stop()
        _unknown("the job ended before the cost of timing its reads before Python 3.12 was known")


def _decide(trial: _Trial, now_ns: int) -> None:
    global _trial
    _trial = None
    watch = trial.watch
    if watch is None or sys.getprofile() is not trial.count:  # the job's own profiler is set
        stop()
        _unknown("the job set a profiler of its own on the loop's thread, left alone")
        return
    _calibrate(trial)  # again, the trial's steps after the first: the lower of the two holds
    per_step, step_ns, cost_ns = _estimate(trial, now_ns)
    if _affordable(step_ns, cost_ns):
        sys.setprofile(watch)
        input_pipelines.loop_reads(trial.generator, tracker.clock())
        return
    stop()
    sys.setprofile(None)
    # (Steps shorter than what counting their calls is estimated to cost: more than a step.)
    share = f"{cost_ns / step_ns:.1%} of a {step_ns / 1e6:.2f} ms step" if step_ns > 0 else ""
    _unknown(
        f"timing its reads before Python 3.12 would cost ~{cost_ns / 1000:.0f} µs a step "
        f"({share or 'more than a whole step'}: {per_step:.0f} Python and C calls a step in "
        "the loop's thread, each seen)"
    )


def _estimate(trial: _Trial, now_ns: int, *, robust: bool = True) -> tuple[float, float, float]:
    """(profile calls a step, a step's ns without the trial's counting, the watch's ns a step):
    `robust`, the steps' median (blind to stalls of fewer than half of them), else their mean."""
    per_step = trial.events / trial.steps
    mean_ns = (now_ns - trial.start_ns) / trial.steps
    typical_ns = statistics.median(trial.durations) if robust and trial.durations else mean_ns
    step_ns = typical_ns - per_step * trial.count_ns * IN_STEP_FACTOR
    return per_step, step_ns, per_step * trial.watch_ns * IN_STEP_FACTOR


def _affordable(step_ns: float, cost_ns: float) -> bool:
    return step_ns > 0 and cost_ns <= BUDGET * step_ns


def _calibrate(trial: _Trial) -> None:
    """Measure one call of the trial's profile function and of the watching one (built at the
    first calibration), each kept at the lowest of the calibrations so far."""
    if sys.getprofile() is not trial.count:
        return  # the job's own profiler is set: `_decide` says so
    count = trial.count
    if count is None:
        return
    if trial.watch is None:
        trial.watch = _watch(trial, _token)
    events = trial.events  # (the counting function's own calibration counts none of the job's)
    trial.count_ns = min(trial.count_ns, _call_ns(count))
    trial.watch_ns = min(trial.watch_ns, _call_ns(trial.watch))
    trial.events = events


def _watch(trial: _Trial, token: object | None) -> Profile:
    """The profile function that times the loop's resumes of its generator, and nothing else."""
    generator, loop = trial.generator, trial.loop
    reading: tuple[int, int, int] | None = None  # (generator frame's id, request, busy bits)
    setprofile = sys.setprofile  # held: at exit this module's globals may be gone before it

    def watch(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal reading
        if token is not _token:  # (at exit `_token` may read None: the watch removes itself)
            setprofile(None)
            return
        if frame.f_code is not generator:
            return
        try:
            if event == "call":
                back = frame.f_back
                if back is not None and back.f_code is loop:
                    reading = (id(frame), *loop_read_requested())
            elif event == "return" and reading is not None and reading[0] == id(frame):
                request, busy = reading[1], reading[2]
                reading = None
                loop_read_delivered(request, busy)
        except Exception as error:  # never into the user's loop
            emitter.report_once("generator", f"generator read hook failed: {error!r}")

    return watch


def _call_ns(profile: Profile) -> float:
    """What one call of `profile` costs, in ns: C calls timed under it against without it, in
    the thread's CPU time (a wait for a core, or for the interpreter's lock while another
    thread holds it, is none of it), the fastest of rounds that alternate the two."""

    def calls() -> int:
        size, empty, clock = len, (), _CALIBRATION_CLOCK
        start = clock()
        for _ in range(_CALIBRATION_CALLS):
            size(empty)
        return clock() - start

    previous = sys.getprofile()
    bare, seen = [], []
    try:
        for _ in range(_CALIBRATION_ROUNDS):
            sys.setprofile(None)
            bare.append(calls())
            sys.setprofile(profile)
            seen.append(calls())
    finally:
        sys.setprofile(previous)
    return max(min(seen) - min(bare), 0) / (2 * _CALIBRATION_CALLS)  # a c_call and a c_return


def _unknown(why: str) -> None:
    phase = tracker.current_phase() or "train"
    reason = f"the loop reads a Python generator; {why}: {_UNWATCHED}"
    emitter.report_once(
        f"data_wait:{phase}:generator",
        f"data wait of {phase!r} unknown: {reason}",
        kind="data_wait_unavailable",
        phase=phase,
        reason=reason,
    )
