"""Reference for the phase statistics: the straightforward computation, span by span, with a
`Span` object per span and interval sets per gap — the definition `gpuwhy.analysis.phases`
(arrays, sorts and whole-array sums) must agree with exactly. Quadratic-ish and memory-hungry on
a million spans; fine for the recordings of the tests.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from gpuwhy.analysis.intervals import Interval, IntervalSet, total_ns, union
from gpuwhy.analysis.phases import PhaseStats, weighted_percentile, with_pseudo_phases
from gpuwhy.model import NS_PER_S, Span, SpanKind


@dataclass
class _PhaseSpans:
    phase: list[Interval] = field(default_factory=list)
    steps: dict[int | None, list[Span]] = field(default_factory=lambda: defaultdict(list))
    waits: dict[int | None, list[Interval]] = field(default_factory=lambda: defaultdict(list))
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


def _phase_stats(name: str, entry: _PhaseSpans, run_ns: int) -> PhaseStats:
    extent = IntervalSet(_extent(entry))
    time_ns = extent.total_ns
    step_counts = {pid: sum(max(s.steps, 1) for s in spans) for pid, spans in entry.steps.items()}
    steps = max(step_counts.values(), default=0)
    durations = [
        ((s.end_ns - s.start_ns) / max(s.steps, 1) / NS_PER_S, max(s.steps, 1))
        for spans in entry.steps.values()
        for s in spans
    ]
    pids = set(entry.steps) | set(entry.waits)
    waits_ns = [total_ns(union(_clip_all(entry.waits.get(pid, []), extent))) for pid in pids]
    wait_ns = sum(waits_ns) / len(waits_ns) if waits_ns else 0.0
    gaps_ns = [
        _step_gaps_ns(entry.steps[pid], entry.waits.get(pid, []), extent) for pid in entry.steps
    ]
    gap_ns = sum(gaps_ns) / len(gaps_ns) if gaps_ns else 0.0
    # A STEP without its WAIT is unknown, never zero (docs/hooks.md): the fraction is measured
    # only where WAITs exist, and `coverage` says for what share of the steps.
    step_spans = sum(len(spans) for spans in entry.steps.values())
    wait_spans = sum(len(waits) for waits in entry.waits.values())
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
        data_wait_fraction=(wait_ns / time_ns if time_ns > 0 else 0.0) if measured else None,
        data_wait_coverage=coverage if measured or step_spans else None,
        step_gap_s=gap_ns / NS_PER_S,
        rounds=len(union(entry.phase)),
        intervals=tuple(extent.intervals),
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
