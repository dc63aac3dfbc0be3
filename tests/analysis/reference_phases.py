"""Reference for the phase statistics: the straightforward computation, span by span, with a
`Span` object per span and interval sets per gap — the definition `gpuwhy.analysis.phases`
(arrays, sorts and whole-array sums) must agree with exactly. Quadratic-ish and memory-hungry on
a million spans; fine for the recordings of the tests.
"""

from __future__ import annotations

import bisect
import itertools
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from gpuwhy.analysis.intervals import Interval, IntervalSet, total_ns, union
from gpuwhy.analysis.phases import PhaseStats, weighted_percentile, with_pseudo_phases
from gpuwhy.analysis.steady import COLD_WAIT_SHARE, WARMUP_FACTOR
from gpuwhy.model import NS_PER_S, Span, SpanKind


@dataclass
class _PhaseSpans:
    phase: list[Interval] = field(default_factory=list)
    steps: dict[int | None, list[Span]] = field(default_factory=lambda: defaultdict(list))
    waits: dict[int | None, list[Interval]] = field(default_factory=lambda: defaultdict(list))
    input_ends: dict[int | None, list[Interval]] = field(
        default_factory=lambda: defaultdict(list)
    )  # WAIT spans of 0 steps: a loop's wait for its input to end
    first_ns: int | None = None

    def note(self, start_ns: int) -> None:
        if self.first_ns is None or start_ns < self.first_ns:
            self.first_ns = start_ns


def _collect(spans: Iterable[Span]) -> dict[str, _PhaseSpans]:
    by_phase: dict[str, _PhaseSpans] = defaultdict(_PhaseSpans)
    for span in spans:
        if span.end_ns < span.start_ns or (
            span.end_ns == span.start_ns and span.kind is SpanKind.PHASE
        ):
            continue  # a zero WAIT stays: it says "measured, no wait" (docs/hooks.md)
        entry = by_phase[span.phase]
        entry.note(span.start_ns)
        if span.kind is SpanKind.PHASE:
            entry.phase.append((span.start_ns, span.end_ns))
        elif span.kind is SpanKind.STEP:
            entry.steps[span.pid].append(span)
        else:
            entry.waits[span.pid].append((span.start_ns, span.end_ns))
            if span.steps == 0:
                entry.input_ends[span.pid].append((span.start_ns, span.end_ns))
    return by_phase


def _extent(entry: _PhaseSpans) -> list[Interval]:
    if entry.phase:
        return union(entry.phase)
    starts = [s.start_ns for spans in entry.steps.values() for s in spans]
    starts += [w[0] for waits in entry.waits.values() for w in waits]
    ends = [s.end_ns for spans in entry.steps.values() for s in spans]
    ends += [w[1] for waits in entry.waits.values() for w in waits]
    return [(min(starts), max(ends))] if starts else []


def _step_gaps_ns(steps: list[Span], waits: list[Interval], extent: IntervalSet) -> int:
    """Time between consecutive steps of one process that is not data wait, inside the phase."""
    ordered = sorted(steps, key=lambda s: s.start_ns)
    wait_set = IntervalSet(waits)
    gap_total = 0
    for prev, nxt in itertools.pairwise(ordered):
        if nxt.start_ns <= prev.end_ns:
            continue
        gap = extent.clip(prev.end_ns, nxt.start_ns)
        if total_ns(gap) < nxt.start_ns - prev.end_ns:
            continue  # a phase boundary lies between them (e.g. validation between epochs)
        gap_total += total_ns(gap) - total_ns(wait_set.clip(prev.end_ns, nxt.start_ns))
    return max(gap_total, 0)


@dataclass
class _Steady:
    intervals: list[Interval]
    steps: list[Span]
    warmup: list[Span]
    lead_in_ns: int
    rounds_warmed: int
    input_end_ns: int
    costliest_ns: int  # the largest warm-up plus input end of one round
    cold_round_ns: int = 0  # a cold first round's first step's start to its last step's end
    cold_round_steps: int = 0

    @property
    def count(self) -> int:
        return sum(max(s.steps, 1) for s in self.steps)


def _steady(
    spans: list[Span],
    waits: list[Interval],
    rounds: Sequence[Interval],
    median_s: float | None,
    input_ends: list[Interval],
) -> _Steady:
    """Steady steps, round by round: the leading steps slower than 3x the median (at most half
    of the round's) are warm-up; the steady interval runs from the first steady step's start
    (or that of a wait running into it, not before the previous step's end or the round's
    start) to the round's last step's end, or to the start of the last wait for the input's end
    that begins inside it and reaches that end."""
    merged = union(waits)
    ordered = sorted(spans, key=lambda s: s.start_ns)
    result = _Steady([], [], [], 0, 0, 0, 0)
    by_round = [
        (start, end, [s for s in ordered if start <= s.start_ns < end]) for start, end in rounds
    ]
    by_round = [r for r in by_round if r[2]]
    cold = _cold([members for *_, members in by_round], merged, input_ends, median_s)
    for index, (start, end, members) in enumerate(by_round):
        if cold and index == 0:
            result.lead_in_ns += max(members[0].start_ns - start, 0)
            result.cold_round_ns = min(max(s.end_ns for s in members), end) - members[0].start_ns
            result.cold_round_steps = sum(max(s.steps, 1) for s in members)
            continue
        warm = _warm(members, median_s)
        result.warmup += members[:warm]
        result.rounds_warmed += warm > 0
        result.lead_in_ns += max(members[0].start_ns - start, 0)
        first = members[warm].start_ns
        floor = members[warm - 1].end_ns if warm else start
        leading = [w for w in merged if w[0] < first <= w[1]]
        begin = max(leading[0][0], floor) if leading else first
        last_end = min(max(s.end_ns for s in members[warm:]), end)
        ending = [e for e in sorted(input_ends) if begin < e[0] <= last_end <= e[1]]
        round_ns = members[warm].start_ns - members[0].start_ns
        if ending:
            result.input_end_ns += last_end - ending[-1][0]
            round_ns += last_end - ending[-1][0]
            last_end = ending[-1][0]
        result.costliest_ns = max(result.costliest_ns, round_ns)
        if last_end > begin:
            result.intervals.append((begin, last_end))
        result.steps += members[warm:]
    return result


def _warm(members: list[Span], median_s: float | None) -> int:
    """How many of a round's leading steps (sorted) are warm-up: slower than 3x the median per
    step, at most half of them."""
    warm = 0
    while (
        warm < len(members) // 2
        and median_s
        and (members[warm].end_ns - members[warm].start_ns) / max(members[warm].steps, 1)
        > WARMUP_FACTOR * median_s * NS_PER_S
    ):
        warm += 1
    return warm


def _inside_ns(intervals: list[Interval], start: int, end: int) -> int:
    """Length of disjoint `intervals` inside [start, end)."""
    return sum(max(min(b, end) - max(a, start), 0) for a, b in intervals)


def _cold(
    by_round: list[list[Span]],
    merged_waits: list[Interval],
    input_ends: list[Interval],
    median_s: float | None,
) -> bool:
    """Whether the first of the rounds (each its steps, sorted) is cold: its median step per
    step over 3x the later rounds' median; or its steps from the first steady one on waited
    over 3x as long per step as the later rounds' did, and at least 20 % of their time. What a
    round waits for its input to end is not its steps' wait."""
    if len(by_round) < 2:
        return False

    def per_step(members: list[Span]) -> list[float]:
        return [(s.end_ns - s.start_ns) / max(s.steps, 1) for s in members]

    later = [d for members in by_round[1:] for d in per_step(members)]
    if statistics.median(later) < statistics.median(per_step(by_round[0])) / WARMUP_FACTOR:
        return True
    if not merged_waits:
        return False
    ends = union(input_ends)

    def steady_wait(members: list[Span]) -> tuple[int, int, int]:
        steady = members[_warm(members, median_s) :]
        start, end = steady[0].start_ns, max(s.end_ns for s in steady)
        wait = _inside_ns(merged_waits, start, end) - _inside_ns(ends, start, end)
        return wait, sum(max(s.steps, 1) for s in steady), end - start

    wait, steps, time_ns = steady_wait(by_round[0])
    if wait < COLD_WAIT_SHARE * time_ns:
        return False
    tallies = [steady_wait(members) for members in by_round[1:]]
    later_wait, later_steps = sum(t[0] for t in tallies), sum(t[1] for t in tallies)
    return wait * later_steps > WARMUP_FACTOR * later_wait * steps


def _rounds(phase_spans: list[Interval], extent: IntervalSet) -> list[Interval]:
    """PHASE spans as rounds: overlapping ones merged, touching ones apart; else the extent."""
    rounds: list[list[int]] = []
    for start, end in sorted(phase_spans):
        if end <= start:
            continue
        if rounds and start < rounds[-1][1]:
            rounds[-1][1] = max(rounds[-1][1], end)
        else:
            rounds.append([start, end])
    return [(a, b) for a, b in rounds] or list(extent.intervals)


def _watched_ns(steady: _Steady, waits: list[Interval]) -> int:
    """The steady steps' windows (from the step before's end, or the steady interval's start,
    to the step's end), from the first in which a wait ends to the last, summed."""
    windows = []
    for begin, end in steady.intervals:
        previous = begin
        for step in sorted(
            (s for s in steady.steps if begin <= s.start_ns < end), key=lambda s: s.start_ns
        ):
            until = max(min(step.end_ns, end), previous)
            windows.append((previous, until))
            previous = until
    timed = [
        index
        for index, (a, b) in enumerate(windows)
        if any(a <= wait_end < b for _, wait_end in waits)
    ]
    return sum(b - a for a, b in windows[timed[0] : timed[-1] + 1]) if timed else 0


def _durations(spans: Iterable[Span]) -> list[tuple[float, int]]:
    return [((s.end_ns - s.start_ns) / max(s.steps, 1) / NS_PER_S, max(s.steps, 1)) for s in spans]


def _phase_stats(name: str, entry: _PhaseSpans, run_ns: int) -> PhaseStats:
    extent = IntervalSet(_extent(entry))
    time_ns = extent.total_ns
    step_counts = {pid: sum(max(s.steps, 1) for s in spans) for pid, spans in entry.steps.items()}
    steps = max(step_counts.values(), default=0)
    median_s = weighted_percentile(
        [d for spans in entry.steps.values() for d in _durations(spans)], 0.50
    )
    steady = {
        pid: _steady(
            spans,
            entry.waits.get(pid, []),
            _rounds(entry.phase, extent),
            median_s,
            entry.input_ends.get(pid, []),
        )
        for pid, spans in entry.steps.items()
    }
    busiest = max(steady.values(), key=lambda s: (s.count, total_ns(s.intervals)), default=None)
    durations = [d for s in steady.values() for d in _durations(s.steps)]
    pids = set(entry.steps) | set(entry.waits)
    waits_ns = [total_ns(union(_clip_all(entry.waits.get(pid, []), extent))) for pid in pids]
    wait_ns = sum(waits_ns) / len(waits_ns) if waits_ns else 0.0
    steady_waits_ns = [
        total_ns(
            union(
                _clip_all(
                    entry.waits.get(pid, []),
                    IntervalSet((steady.get(pid) or busiest).intervals),
                )
            )
        )
        for pid in pids
        if busiest
    ]
    steady_wait = sum(steady_waits_ns) / len(steady_waits_ns) if steady_waits_ns else 0.0
    if len(entry.steps) >= 2:  # ranks in lockstep: the slowest rank's wait is the phase's
        wait_ns = max(
            total_ns(union(_clip_all(entry.waits.get(pid, []), extent))) for pid in entry.steps
        )
        steady_wait = max(
            total_ns(union(_clip_all(entry.waits.get(pid, []), IntervalSet(steady[pid].intervals))))
            for pid in entry.steps
        )
    steady_ns = total_ns(busiest.intervals) if busiest else 0
    waiting = next((pid for pid, s in steady.items() if s is busiest), None)
    if len(entry.steps) >= 2:
        waiting = max(
            entry.steps,
            key=lambda pid: total_ns(
                union(_clip_all(entry.waits.get(pid, []), IntervalSet(steady[pid].intervals)))
            ),
        )
    lone = len(entry.steps) >= 2 or pids <= {waiting}
    longest_ns = (
        _longest_wait_ns(entry.waits.get(waiting, []), steady[waiting].intervals)
        if lone and waiting in steady
        else 0
    )
    gaps_ns = [
        _step_gaps_ns(entry.steps[pid], entry.waits.get(pid, []), extent) for pid in entry.steps
    ]
    gap_ns = sum(gaps_ns) / len(gaps_ns) if gaps_ns else 0.0
    # A STEP without its WAIT is unknown, never zero (docs/hooks.md): the fraction is measured
    # only where WAITs exist, and `coverage` says for what share of the steps; one process's
    # steady wait, timed in part of its steady steps, is read over those.
    step_spans = sum(len(spans) for spans in entry.steps.values())
    wait_spans = sum(len(waits) for waits in entry.waits.values())
    if 0 < wait_spans < step_spans and busiest is not None and pids == {waiting}:
        watched_ns = _watched_ns(busiest, entry.waits.get(waiting, []))
        if 0 < watched_ns < steady_ns:
            steady_wait *= steady_ns / watched_ns
    measured = wait_spans > 0
    coverage = min(wait_spans / step_spans, 1.0) if step_spans else (1.0 if measured else None)
    return PhaseStats(
        name=name,
        time_s=time_ns / NS_PER_S,
        share=time_ns / run_ns if run_ns > 0 else 0.0,
        steps=steps,
        step_time_p50_s=weighted_percentile(durations, 0.50),
        step_time_p95_s=weighted_percentile(durations, 0.95),
        data_wait_s=wait_ns / NS_PER_S,
        data_wait_fraction=(
            (min(steady_wait / steady_ns, 1.0) if steady_ns else wait_ns / time_ns)
            if measured and time_ns > 0
            else (0.0 if measured else None)
        ),
        data_wait_coverage=coverage if measured or step_spans else None,
        step_gap_s=gap_ns / NS_PER_S,
        rounds=len(_rounds(entry.phase, IntervalSet([]))),
        intervals=tuple(extent.intervals),
        steady_time_s=steady_ns / NS_PER_S if busiest else None,
        steady_steps=busiest.count if busiest else 0,
        steady_data_wait_s=steady_wait / NS_PER_S,
        steady_wait_longest_s=longest_ns / NS_PER_S,
        one_time_s=max(time_ns - steady_ns, 0) / NS_PER_S if busiest else 0.0,
        warmup_steps=sum(max(s.steps, 1) for s in busiest.warmup) if busiest else 0,
        warmup_s=_warmup_ns(busiest) / NS_PER_S if busiest else 0.0,
        lead_in_s=busiest.lead_in_ns / NS_PER_S if busiest else 0.0,
        input_end_s=busiest.input_end_ns / NS_PER_S if busiest else 0.0,
        repeated_warmup_s=(
            (
                _warmup_ns(busiest)
                + busiest.input_end_ns
                - (0 if busiest.cold_round_steps else busiest.costliest_ns)
            )
            / NS_PER_S
            if busiest
            else 0.0
        ),
        rounds_warmed=busiest.rounds_warmed if busiest else 0,
        cold_round_s=busiest.cold_round_ns / NS_PER_S if busiest else 0.0,
        cold_round_steps=busiest.cold_round_steps if busiest else 0,
    )


def _warmup_ns(steady: _Steady) -> int:
    """Each warm-up step from its start to the next step's start (warm-up or steady)."""
    starts = sorted(s.start_ns for s in (*steady.warmup, *steady.steps))
    return sum(starts[bisect.bisect_right(starts, w.start_ns)] - w.start_ns for w in steady.warmup)


def _longest_wait_ns(waits: list[Interval], intervals: Iterable[Interval]) -> int:
    """The longest stretch of waiting without a break inside any one of `intervals`."""
    return max(
        (
            end - start
            for interval in intervals
            for start, end in union(_clip_all(waits, IntervalSet([interval])))
        ),
        default=0,
    )


def _clip_all(intervals: list[Interval], extent: IntervalSet) -> list[Interval]:
    return [part for start, end in intervals for part in extent.clip(start, end)]


def phase_stats(spans: Iterable[Span], run_start_ns: int, run_end_ns: int) -> dict[str, PhaseStats]:
    """Named phases in order of first appearance, then "data_wait" (if any) and "other"."""
    run_ns = max(run_end_ns - run_start_ns, 0)
    by_phase = _collect(spans)
    ordered = sorted(by_phase.items(), key=lambda item: item[1].first_ns or 0)
    phases = {name: _phase_stats(name, entry, run_ns) for name, entry in ordered if name}
    step_starts = sorted(
        s.start_ns for entry in by_phase.values() for spans in entry.steps.values() for s in spans
    )
    for name, phase in phases.items():
        phases[name] = replace(phase, resume_s=_resume(phase.intervals, step_starts))
    return with_pseudo_phases(phases, run_start_ns, run_end_ns)


def _resume(intervals: Sequence[Interval], step_starts: Sequence[int]) -> tuple[float, ...]:
    """For each interval, seconds from its end to the first step starting after it (0 if none,
    or if the phase itself comes back first)."""
    gaps = []
    for k, (_, end) in enumerate(intervals):
        i = bisect.bisect_left(step_starts, end)
        following = intervals[k + 1][0] if k + 1 < len(intervals) else None
        if i < len(step_starts) and (following is None or step_starts[i] <= following):
            gaps.append((step_starts[i] - end) / NS_PER_S)
        else:
            gaps.append(0.0)
    return tuple(gaps)


def _subtract(base: list[Interval], holes: Sequence[Interval]) -> list[Interval]:
    """Parts of ``base`` not covered by the disjoint sorted ``holes``."""
    result: list[Interval] = []
    for start, end in base:
        cursor = start
        for hole_start, hole_end in holes:
            if hole_end <= cursor or hole_start >= end:
                continue
            if hole_start > cursor:
                result.append((cursor, hole_start))
            cursor = max(cursor, hole_end)
        if cursor < end:
            result.append((cursor, end))
    return result
