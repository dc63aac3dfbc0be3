"""Steady-state steps apart from one-time work, in each phase.

A phase's time also holds work done once per round rather than once per step: tracing and
compiling the step function on its first call, starting an iterator and its workers, filling a
cache on the first epoch. A user who asks "how much faster without the wait?" means the steps
that repeat, so every per-step figure (data-wait share, step time, the fix's speed-up) is taken
on the *steady* steps, and the rest is reported as one-time work (docs/findings.md).

Per round (a PHASE span: an epoch, an evaluation):

- the *lead-in*, from the round's start to its first step (iterator set-up, callbacks);
- *warm-up steps*: the round's leading steps that took more than ``WARMUP_FACTOR`` times the
  phase's median step — at most half of the round's steps, so a round of uniformly slow steps
  stays steady;
- a *cold first round*: where later rounds follow it, a first round whose median step took more
  than ``WARMUP_FACTOR`` times the later rounds' median step is one-time work as a whole (a
  tf.data `cache()` being filled, files read for the first time): the steps that repeat for the
  rest of the run are the later rounds'. So is one whose steps *waited for input* more than
  ``WARMUP_FACTOR`` times as long per step as the later rounds' steps did, that wait being a
  highly input-bound share of their time (``COLD_WAIT_SHARE``): where a step computes longer
  than the input takes to make, or parallel reads fill the cache in bursts, the filling epoch's
  median step is less than 3x slower;
- the *steady* interval, from the first steady step's start (or the start of the wait that
  leads into it, where a recording keeps a step's wait apart, before it) to the round's last
  step's end (before its wait for the input's end, if any);
- the *tail*, after the last step (epoch-end callbacks), and a plain loop's wait for its input to
  end (the pull that found no more data: workers shutting down), which ends the round's last
  step but is paid once per round, not per step.

Steps tile their loop (a STEP span runs until the next one begins, docs/hooks.md), so a steady
interval holds the steps, their waits and the host work between them, and nothing else.
"""

from __future__ import annotations

import bisect
import itertools
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import sub, truediv

from gpuwhy.analysis.intervals import Interval, SortedRuns, clip, total_ns
from gpuwhy.analysis.spanruns import Runs, waited_ns
from gpuwhy.warmup import WARMUP_FACTOR, first_steady

COLD_WAIT_SHARE = 0.2
"""XProf's "highly input-bound" line: 20 % of step time waiting
(references.md#xprof-input-pipeline)."""


@dataclass(frozen=True)
class SteadyState:
    """One process's steady steps in one phase (ns) and the one-time work around them."""

    intervals: tuple[Interval, ...]  # the steady interval of each round that has steps
    steps: int  # steps inside them (a span of N steps counts N)
    warmup_steps: int
    warmup_ns: int  # warm-up steps, from the first step's start to the first steady one's
    lead_in_ns: int  # rounds' starts to their first step
    rounds_warmed: int  # rounds that began with at least one warm-up step
    input_end_ns: int  # waits for the input to end, at the rounds' last steps
    cold_round_steps: int  # a cold first round's steps (none of them warm-up steps)
    cold_round_ns: int  # its first step's start to its last step's end
    repeated_ns: int  # warm-up and input ends of every round but the costliest
    runs: Runs  # the steady steps themselves (for step-time percentiles)
    # The other steps' durations (ns), where each span is one step: the steady ones'
    # percentiles are then those of all steps less these (spanruns.rank_percentiles).
    dropped_ns: list[int] | None = None

    @property
    def time_ns(self) -> int:
        return total_ns(self.intervals)


def rounds_of(phase_spans: Sequence[Interval], extent: Sequence[Interval]) -> list[Interval]:
    """A phase's rounds: its PHASE spans, overlapping ones merged but touching ones kept apart
    (one epoch may begin the moment the last ended); its extent where it has none."""
    rounds: list[Interval] = []
    for start, end in sorted(i for i in phase_spans if i[1] > i[0]):
        if rounds and start < rounds[-1][1]:
            rounds[-1] = (rounds[-1][0], max(end, rounds[-1][1]))
        else:
            rounds.append((start, end))
    return rounds or list(extent)


def steady_state(
    steps: Runs,
    waits: SortedRuns,
    rounds: Sequence[Interval],
    median_s: float | None,
    input_ends: Sequence[Interval] = (),
) -> SteadyState:
    """Split one process's steps in a phase (its rounds, disjoint and sorted: `rounds_of`) into
    warm-up and steady; ``median_s`` is the phase's median time per step, ``input_ends`` the
    process's waits for its input to end (WAIT spans of 0 steps), sorted."""
    ordered = steps.ordered()
    starts, ends = ordered.starts, ordered.ends
    weights = list(ordered.weights())
    median_ns = (median_s or 0.0) * 1e9
    kept = Runs()
    kept_ranges: list[tuple[int, int]] = []  # of the spans in start order, ascending
    intervals: list[Interval] = []
    steady_steps = warmup_steps = warmup_ns = lead_in_ns = rounds_warmed = input_end_ns = 0
    costliest_ns = cold_round_ns = cold_round_steps = 0
    end_starts = [start for start, _ in input_ends]
    bounds = [
        (start, end, bisect.bisect_left(starts, start), bisect.bisect_left(starts, end))
        for start, end in rounds
    ]
    bounds = [b for b in bounds if b[2] < b[3]]  # the rounds that have steps
    ranges = [(first, stop) for *_, first, stop in bounds]
    cold = _cold_first_round(starts, ends, weights, ranges) or _cold_by_wait(
        starts, ends, weights, ranges, waits, SortedRuns.of(input_ends), median_ns
    )
    for index, (start, end, first, stop) in enumerate(bounds):
        lead_in_ns += max(starts[first] - start, 0)
        if cold and index == 0:  # nothing of a cold round is steady
            cold_round_ns = min(max(ends[first:stop]), end) - starts[first]
            cold_round_steps = sum(weights[first:stop])
            continue
        steady = first_steady(starts, ends, weights, first, stop, median_ns)
        round_ns = starts[steady] - starts[first]
        if steady > first:
            rounds_warmed += 1
            warmup_steps += sum(weights[first:steady])
            warmup_ns += round_ns
        floor = ends[steady - 1] if steady > first else start
        begin = _leading_wait_start(waits, starts[steady], floor)
        last_end = min(max(ends[steady:stop]), end)  # a slice: islice would walk from 0
        k = bisect.bisect_right(end_starts, last_end) - 1  # the last input end in the round
        if k >= 0 and begin < end_starts[k] and input_ends[k][1] >= last_end:
            input_end_ns += last_end - end_starts[k]
            round_ns += last_end - end_starts[k]
            last_end = end_starts[k]
        costliest_ns = max(costliest_ns, round_ns)
        if last_end > begin:
            intervals.append((begin, last_end))
        steady_steps += sum(weights[steady:stop])
        kept_ranges.append((steady, stop))
        kept.extend(
            starts[steady:stop],
            ends[steady:stop],
            ordered.counts[steady:stop] if ordered.counts is not None else [1] * (stop - steady),
        )
    return SteadyState(
        dropped_ns=_outside(starts, ends, kept_ranges) if ordered.counts is None else None,
        intervals=tuple(intervals),
        steps=steady_steps,
        warmup_steps=warmup_steps,
        warmup_ns=warmup_ns,
        lead_in_ns=lead_in_ns,
        rounds_warmed=rounds_warmed,
        input_end_ns=input_end_ns,
        cold_round_steps=cold_round_steps,
        cold_round_ns=cold_round_ns,
        # The start-up round is the cold one where there is one, else the costliest.
        repeated_ns=warmup_ns + input_end_ns - (0 if cold else costliest_ns),
        runs=kept,
    )


def _outside(
    starts: Sequence[int], ends: Sequence[int], ranges: Sequence[tuple[int, int]]
) -> list[int]:
    """Durations of the spans outside the ascending, disjoint index `ranges`."""
    durations: list[int] = []
    previous = 0
    for first, stop in [*ranges, (len(starts), len(starts))]:
        durations += map(sub, ends[previous:first], starts[previous:first])
        previous = stop
    return durations


def _per_step(
    starts: Sequence[int], ends: Sequence[int], weights: Sequence[int], first: int, stop: int
) -> Iterable[float]:
    """The time per step of spans ``first``..``stop`` - 1 (a span of N steps: its average)."""
    return map(truediv, map(sub, ends[first:stop], starts[first:stop]), weights[first:stop])


def _cold_first_round(
    starts: Sequence[int],
    ends: Sequence[int],
    weights: Sequence[int],
    rounds: Sequence[tuple[int, int]],
) -> bool:
    """Whether the first round's median step (per step of each span) took more than
    ``WARMUP_FACTOR`` times the later rounds' median step; `rounds`: index ranges of the spans,
    the rounds that have steps."""
    if len(rounds) < 2:
        return False
    bound = statistics.median(_per_step(starts, ends, weights, *rounds[0])) / WARMUP_FACTOR
    # The later rounds hold nearly every step (a million in a day's run): rather than sort
    # them for their median, count the steps under the bound; the median is under it when
    # more than half are, and only an even count split exactly in two needs the middle pair.
    later = list(
        itertools.chain.from_iterable(_per_step(starts, ends, weights, *r) for r in rounds[1:])
    )
    below = sum(map(bound.__gt__, later))
    if 2 * below != len(later):
        return 2 * below > len(later)
    return max(filter(bound.__gt__, later)) + min(filter(bound.__le__, later)) < 2 * bound


def _cold_by_wait(
    starts: Sequence[int],
    ends: Sequence[int],
    weights: Sequence[int],
    rounds: Sequence[tuple[int, int]],
    waits: SortedRuns,
    input_ends: SortedRuns,
    median_ns: float,
) -> bool:
    """Whether the first round's steps waited for input more than ``WARMUP_FACTOR`` times as
    long per step as the later rounds' steps did, and at least ``COLD_WAIT_SHARE`` of their
    time: each round's steps from its first steady one on, their waits summed. Sums, not a
    median step's: a cache filled by parallel reads arrives in bursts (a step of 50 ms, then
    three of 10 ms that find their batches read), so half of the filling epoch's steps may wait
    little while they all wait ~60 % of their time against 2-3 % cached (docs/data-wait.md,
    examples/keras_slow_input.py --fixed). What every round waits once is not its steps'
    waits: its warm-up steps' (an iterator started again: one pull of 155 ms against 0.5 ms a
    step, seen on a cached tf.data epoch) and its wait for its input to end (a pipeline shut
    down)."""
    if len(rounds) < 2 or not waits.starts:
        return False

    def steady_wait(first: int, stop: int) -> tuple[int, int, int]:
        """(wait, steps, time) of a round's steps from its first steady one: steps tile
        their loop, so their hull holds them and their waits."""
        first = first_steady(starts, ends, weights, first, stop, median_ns)
        hull = starts[first], max(ends[first:stop])
        wait = waits.overlap_ns(*hull) - input_ends.overlap_ns(*hull)
        return wait, sum(weights[first:stop]), hull[1] - hull[0]

    wait, steps, time_ns = steady_wait(*rounds[0])
    if wait < COLD_WAIT_SHARE * time_ns:
        return False
    later_wait = later_steps = 0
    for a, b in rounds[1:]:
        round_wait, round_steps, _ = steady_wait(a, b)
        later_wait += round_wait
        later_steps += round_steps
    return bool(wait * later_steps > WARMUP_FACTOR * later_wait * steps)


def _leading_wait_start(waits: SortedRuns, step_start: int, floor: int) -> int:
    """Where the step starting at ``step_start`` really began: the start of a wait that ends
    at or runs into it, never before ``floor`` (the previous step's end, or the round's start)."""
    k = bisect.bisect_left(waits.ends, step_start)  # the first wait ending at/after the step
    if k < len(waits.starts) and waits.starts[k] < step_start:
        return max(waits.starts[k], floor)
    return step_start


def input_ends_of(waits: Runs) -> list[Interval]:
    """A process's waits for its input to end: its WAIT spans of 0 steps, sorted."""
    if waits.counts is None:
        return []
    return sorted(
        (start, end)
        for start, end, count in zip(waits.starts, waits.ends, waits.counts, strict=True)
        if count == 0
    )


def steady_wait_ns(waits: SortedRuns, steady: SteadyState) -> int:
    """Input wait inside the steady intervals."""
    return waited_ns(waits, steady.intervals)


def steady_step_windows(steady: SteadyState) -> list[Interval]:
    """Each steady step's window, in order: from the previous step's end (or its steady
    interval's start) to its own end. The windows tile the steady intervals, so the waits in
    them sum to `steady_wait_ns`."""
    ordered = steady.runs.ordered()
    starts, ends = ordered.starts, ordered.ends
    windows: list[Interval] = []
    for begin, end in steady.intervals:
        previous = begin
        for k in range(bisect.bisect_left(starts, begin), bisect.bisect_left(starts, end)):
            until = max(min(ends[k], end), previous)
            windows.append((previous, until))
            previous = until
    return windows


def watched_steady_ns(waits: SortedRuns, steady: SteadyState) -> int:
    """The time of the steady steps whose input was timed: the windows (`steady_step_windows`)
    from the first in which a wait ends (a zero one at a step's start included) to the last.
    A step before the first one has an unknown wait, never zero: the steps before a loop's own
    generator was found, a few steps in (generator_pulls.py). One between two timed ones read
    nothing: a loop that takes two optimizer steps on each batch (a GAN's generator and
    discriminator) reads once every other step."""
    ends = waits.ends
    first = last = -1
    windows = steady_step_windows(steady)
    for index, (begin, end) in enumerate(windows):
        k = bisect.bisect_left(ends, begin)
        if k < len(ends) and ends[k] < end:
            first = index if first < 0 else first
            last = index
    return sum(end - begin for begin, end in windows[first : last + 1]) if last >= 0 else 0


def lockstep_wait_ns(
    windows: Sequence[Sequence[Interval]], waits: Sequence[SortedRuns]
) -> int | None:
    """The wait of ranks in lockstep (synchronous data parallelism: no rank leaves a step's
    collective before the last arrives) over their steady steps, from each rank's
    `steady_step_windows` and waits: at each step the longest of the ranks' waits, which the
    whole job stood still for; ranks slow by turns wait more together than any one alone.
    None where the ranks are not seen in lockstep: their steady steps do not pair up one to one,
    or some step's windows share no moment (the ranks of a collective all are in it at once)."""
    if len({len(rank) for rank in windows}) != 1:
        return None
    total = 0
    for step in zip(*windows, strict=True):
        if max(a for a, _ in step) >= min(b for _, b in step):
            return None
        total += max(w.overlap_ns(a, b) for w, (a, b) in zip(waits, step, strict=True))
    return total


def longest_steady_wait_ns(waits: SortedRuns, steady: SteadyState) -> int:
    """The longest single wait (one step's) inside the steady intervals."""
    return max((waits.longest_inside_ns(a, b) for a, b in steady.intervals), default=0)


def paused_steady_wait_ns(
    waits: SortedRuns, steady: SteadyState, pauses: Sequence[Interval]
) -> int:
    """Of the wait inside the steady intervals, the time the process spent in `pauses` (its
    full garbage collections: disjoint, one process holds one GIL)."""
    inside = [part for start, end in steady.intervals for part in clip(pauses, start, end)]
    return waited_ns(waits, inside)


def retraced_ns(
    waits: SortedRuns, intervals: Sequence[Interval], traces: Sequence[Interval]
) -> tuple[int, int]:
    """Calls inside `intervals` (a phase's extent, or its steady intervals) that traced or
    compiled a step function again (hooks/tf_traces.py, jax_compiles.py, torch_compiles.py):
    how many, and their time there less the waits inside them (Keras pulls its batch in the
    traced call). One-time work, not the steps': a change (fixed shapes, tensors for Python
    values) removes it. Each call also ran its step once: counted with it, an over-count of
    one step's compute per retrace, which is milliseconds against the compile's tens."""
    count = total = 0
    for trace in traces:
        inside = [part for start, end in intervals for part in clip([trace], start, end)]
        if inside:
            count += 1
            total += max(total_ns(inside) - waited_ns(waits, inside), 0)
    return count, total


ThreadTimes = Sequence[tuple[int, int, int]]
"""A thread's cumulative (t_ns, run_ns, queued_ns) readings, in time order (hooks/core_waits.py)."""


def thread_ns_within(
    readings: ThreadTimes, intervals: Sequence[Interval]
) -> tuple[int, int] | None:
    """What the thread ran and waited for a core inside `intervals` (a phase's steady ones):
    each counter's growth, read linearly between readings; None without two readings around
    any of them (a stretch outside the readings counts nothing)."""
    if len(readings) < 2:
        return None
    times = [t for t, _, _ in readings]
    run = queued = 0.0
    covered = False
    for start, end in intervals:
        a, b = max(start, times[0]), min(end, times[-1])
        if b <= a:
            continue
        covered = True
        (run_a, queued_a), (run_b, queued_b) = (_counters_at(readings, times, t) for t in (a, b))
        run += run_b - run_a
        queued += queued_b - queued_a
    return (round(run), round(queued)) if covered else None


def _counters_at(readings: ThreadTimes, times: Sequence[int], t: int) -> tuple[float, float]:
    """The (run, queued) counters at `t` (within the readings), linear between the two around it."""
    k = bisect.bisect_left(times, t)
    if k == 0 or times[k] == t:
        return readings[k][1], readings[k][2]
    (t0, run0, queued0), (t1, run1, queued1) = readings[k - 1], readings[k]
    part = (t - t0) / (t1 - t0)
    return run0 + (run1 - run0) * part, queued0 + (queued1 - queued0) * part
