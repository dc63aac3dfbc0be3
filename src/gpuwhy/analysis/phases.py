"""Per-phase time, steps and data wait, from the spans the hooks recorded.

A phase is every PHASE span with one name ("train" once per epoch, "validation" after it...). Its
time is the union of those spans; a phase the hooks marked only with STEP/WAIT spans gets the hull
of them. Two pseudo-phases complete the picture: "data_wait" (all WAIT time, a part *of* the phases
it occurs in) and "other" (run time no phase covers: start-up, imports, model building, saving).
The named phases and "other" partition the run unless a user nests phases.

Per-step figures (step-time percentiles, the data-wait fraction) describe the phase's steady steps,
with one-time work (warm-up steps, lead-ins, tails) reported apart (steady.py); the phase's time and
its total wait stay whole.

Several processes may record the same phase (data-parallel ranks): steps are counted for the
busiest process (ranks step in lockstep) and the data wait is the slowest rank's, so that N ranks
waiting at the same moment count once, not N times, and a rank whose input lags (which the
others wait for at each collective) sets the phase's wait. Each process's own figures stay
apart (`PhaseStats.processes`, analysis/ranks.py).

Spans are kept as arrays per phase, process and kind (spanruns.py), filled from `Span` records
(`phase_stats`) or straight from a recording's stored span columns (`recording_phase_stats`): a
day's million steps take seconds and tens of MB, with the numbers of the span-by-span definition.
"""

from __future__ import annotations

import itertools
import operator
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from gpuwhy.analysis.intervals import Interval, SortedRuns, clip, subtract, total_ns, union
from gpuwhy.analysis.spanruns import (
    Runs,
    rank_percentiles,
    resume_ns,
    sorted_durations,
    step_gaps_ns,
    step_percentiles,
    wait_runs,
    waited_ns,
)
from gpuwhy.analysis.steady import (
    SteadyState,
    ThreadTimes,
    input_ends_of,
    lockstep_wait_ns,
    longest_steady_wait_ns,
    paused_steady_wait_ns,
    retraced_ns,
    rounds_of,
    steady_state,
    steady_step_windows,
    steady_wait_ns,
    thread_ns_within,
    watched_steady_ns,
)
from gpuwhy.model import NS_PER_S, SpanKind

if TYPE_CHECKING:
    from gpuwhy.recording.spancolumns import SpanColumns

OTHER = "other"
DATA_WAIT = "data_wait"
PSEUDO_PHASES = frozenset({OTHER, DATA_WAIT})


@dataclass(frozen=True)
class ProcessPhase:
    """One process's part of a phase (a data-parallel rank's): its own steps and input wait.

    `cycle_s` is the steady wall time per step, wait included: ranks that step in lockstep
    share it, whoever is late. `steady_data_wait_s` is None where this process's input was not
    timed."""

    pid: int | None
    steps: int
    steady_steps: int
    steady_time_s: float
    steady_data_wait_s: float | None
    step_time_p50_s: float | None
    step_time_p95_s: float | None

    @property
    def cycle_s(self) -> float | None:
        return self.steady_time_s / self.steady_steps if self.steady_steps else None

    @property
    def wait_per_step_s(self) -> float | None:
        if self.steady_data_wait_s is None or not self.steady_steps:
            return None
        return self.steady_data_wait_s / self.steady_steps


@dataclass(frozen=True)
class PhaseStats:
    """Where one phase's time went. Times in seconds; fractions of the phase's own time."""

    name: str
    time_s: float
    share: float  # of the run's wall time
    steps: int
    step_time_p50_s: float | None
    step_time_p95_s: float | None
    data_wait_s: float
    data_wait_fraction: float | None  # None: no steps, or their input was not timed
    step_gap_s: float  # between steps, not waiting for data: host work (callbacks, logging...)
    rounds: int  # PHASE spans (touching ones apart): epochs of training, validation passes...
    data_wait_coverage: float | None = None  # share of the steps whose wait was measured
    # Steady state (steady.py): the steps that repeat, apart from one-time work. Per-step
    # figures (step time, data_wait_fraction) are taken on these; time_s and data_wait_s on all.
    steady_time_s: float | None = None  # None: the phase has no steps
    steady_steps: int = 0
    steady_data_wait_s: float = 0.0
    steady_wait_longest_s: float = 0.0  # of steady_data_wait_s: the longest one step waited
    steady_wait_gc_s: float = 0.0  # of steady_data_wait_s: spent in full garbage collections
    # Calls that traced or compiled a step function again, and their time (steady.py): one-time
    # work, in warm-up steps or left out of steady_time_s.
    retraces: int = 0
    retraced_s: float = 0.0
    # The stepping process's main thread over the steady steps (hooks/core_waits.py): the time
    # it ran, and the time it was ready to run but waited for a core. None: not read.
    steady_thread_run_s: float | None = None
    steady_core_wait_s: float | None = None
    one_time_s: float = 0.0  # the phase's time outside its steady steps
    warmup_steps: int = 0
    warmup_s: float = 0.0  # of one_time_s: leading steps > 3x the median step
    cold_round_s: float = 0.0  # of one_time_s: a first round > 3x slower than the later ones
    cold_round_steps: int = 0  # its steps (not in warmup_steps)
    lead_in_s: float = 0.0  # of one_time_s: rounds' starts to their first step
    input_end_s: float = 0.0  # of one_time_s: plain loops' waits for their input to end
    repeated_warmup_s: float = 0.0  # warm-up and input ends of every round but the costliest
    rounds_warmed: int = 0  # rounds that began with warm-up steps
    intervals: tuple[Interval, ...] = field(default=(), repr=False, compare=False)
    # Per interval: seconds from its end until the next step of the run begins (work a phase
    # leaves behind it, e.g. tearing down an evaluation before training resumes).
    resume_s: tuple[float, ...] = field(default=(), repr=False, compare=False)
    # Filled by alignment (GPU samples seen during the phase); None without GPU samples.
    gpu_util_pct: Mapping[int, float] | None = None
    sm_active: Mapping[int, float] | None = None  # 0..1, where GPM/DCGM counters were recorded
    # From a profiler trace: share 0..1 of the phase's time some device work ran (exact).
    gpu_busy: Mapping[int, float] | None = None
    # Each process that stepped in the phase, most steps first (several: data-parallel ranks).
    processes: tuple[ProcessPhase, ...] = field(default=(), repr=False, compare=False)

    @property
    def process_steps(self) -> int:
        """Steps summed over every process: what per-step counts of all ranks' events divide."""
        return sum(p.steps for p in self.processes) or self.steps

    @property
    def is_pseudo(self) -> bool:
        return self.name in PSEUDO_PHASES


@dataclass
class _PhaseSpans:
    phase: list[Interval] = field(default_factory=list)
    # Each process's own PHASE spans: its rounds. Ranks end an epoch a moment apart, so the
    # union of every process's spans would run one rank's epoch into the next.
    phase_by_pid: dict[int | None, list[Interval]] = field(
        default_factory=lambda: defaultdict(list)
    )
    steps: dict[int | None, Runs] = field(default_factory=lambda: defaultdict(Runs))
    waits: dict[int | None, Runs] = field(default_factory=lambda: defaultdict(Runs))
    first_ns: int | None = None

    def note(self, start_ns: int) -> None:
        if self.first_ns is None or start_ns < self.first_ns:
            self.first_ns = start_ns


def weighted_percentile(values: Sequence[tuple[float, int]], q: float) -> float | None:
    """Nearest-rank percentile of (value, weight) pairs: a span of N steps weighs N."""
    pairs = sorted(pair for pair in values if pair[1] > 0)
    if not pairs:
        return None
    total = sum(weight for _, weight in pairs)
    target = q * total
    seen = 0
    for value, weight in pairs:
        seen += weight
        if seen >= target:
            return value
    return pairs[-1][0]


def _collect_columns(blocks: Iterable[SpanColumns], by_phase: dict[str, _PhaseSpans]) -> None:
    """Add the spans of every phase to `by_phase`, from span columns (no object per span)."""
    for block in blocks:
        starts, durations = block.start_ns, block.duration_ns
        is_phase = block.kind is SpanKind.PHASE
        if min(durations) < (1 if is_phase else 0):  # reversed spans, empty phases: skipped
            keep = [i for i, d in enumerate(durations) if d > 0 or (d == 0 and not is_phase)]
            if not keep:
                continue
            starts, durations = [starts[i] for i in keep], [durations[i] for i in keep]
            block = block._replace(steps=[block.steps[i] for i in keep])
        entry = by_phase[block.phase]
        entry.note(min(starts))
        ends = list(map(operator.add, starts, durations))
        if is_phase:
            spans = list(zip(starts, ends, strict=True))
            entry.phase.extend(spans)
            entry.phase_by_pid[block.pid].extend(spans)
        else:
            target = entry.steps if block.kind is SpanKind.STEP else entry.waits
            target[block.pid].extend(starts, ends, block.steps)


def _extent(entry: _PhaseSpans) -> list[Interval]:
    if entry.phase:
        return union(entry.phase)
    runs = [r for r in (*entry.steps.values(), *entry.waits.values()) if len(r)]
    if not runs:
        return []
    return [(min(min(r.starts) for r in runs), max(max(r.ends) for r in runs))]


def _own_phase(entry: _PhaseSpans, pid: int | None) -> list[Interval]:
    """The PHASE spans of process `pid`; every process's where it marked none of its own (its
    steps fall in a phase another process of the job marked)."""
    return entry.phase_by_pid.get(pid) or entry.phase


@dataclass(frozen=True)
class _ProcessFacts:
    """What the hooks timed in each process besides its spans (pid -> readings, in order)."""

    pauses: Mapping[int | None, Sequence[Interval]]  # full garbage collections
    threads: Mapping[int | None, ThreadTimes]  # main-thread run and core-wait readings
    traces: Mapping[int | None, Sequence[Interval]]  # calls that traced or compiled again


def _phase_stats(name: str, entry: _PhaseSpans, run_ns: int, facts: _ProcessFacts) -> PhaseStats:
    pauses, threads = facts.pauses, facts.threads
    extent = union(_extent(entry))
    time_ns = total_ns(extent)
    steps = max((runs.step_count() for runs in entry.steps.values()), default=0)
    durations = sorted_durations(entry.steps.values())  # sorted once for both percentiles
    (median_s,) = (
        rank_percentiles(durations, (0.50,))
        if durations is not None
        else step_percentiles(entry.steps.values(), (0.50,))
    )
    pids = set(entry.steps) | set(entry.waits)
    waits = {
        pid: wait_runs(entry.waits[pid]) if pid in entry.waits else SortedRuns([], [])
        for pid in pids
    }
    waits_ns = [waited_ns(waits[pid], extent) for pid in pids]
    wait_ns = sum(waits_ns) / len(waits_ns) if waits_ns else 0.0
    ranks = [pid for pid, runs in entry.steps.items() if len(runs)]
    steady = {
        pid: steady_state(
            runs,
            waits[pid],
            rounds_of(_own_phase(entry, pid), extent),
            median_s,
            input_ends_of(entry.waits[pid]) if pid in entry.waits else [],
        )
        for pid, runs in entry.steps.items()
    }
    busiest_pid = max(steady, key=lambda pid: (steady[pid].steps, steady[pid].time_ns), default=0)
    busiest = steady.get(busiest_pid)
    dropped = [s.dropped_ns for s in steady.values() if s.dropped_ns is not None]
    p50, p95 = (
        rank_percentiles(durations, (0.50, 0.95), sorted(itertools.chain.from_iterable(dropped)))
        if durations is not None and len(dropped) == len(steady)
        else step_percentiles((s.runs for s in steady.values()), (0.50, 0.95))
    )
    # Waits of a process without steps (a reader thread's pid) fall in the busiest's steady time.
    steady_waits_ns = [
        steady_wait_ns(waits[pid], steady.get(pid) or busiest) for pid in pids if busiest
    ]
    steady_wait = sum(steady_waits_ns) / len(steady_waits_ns) if steady_waits_ns else 0.0
    waiting_pid = busiest_pid
    if len(ranks) >= 2:
        # Ranks in lockstep move at the pace of the one whose input is slowest: its wait is
        # the phase's (the others spend it waiting for that rank at the collective), step by
        # step where their steps pair up.
        wait_ns = max(waited_ns(waits[pid], extent) for pid in ranks)
        waiting_pid = max(ranks, key=lambda pid: steady_wait_ns(waits[pid], steady[pid]))
        steady_wait = steady_wait_ns(waits[waiting_pid], steady[waiting_pid])
        together = lockstep_wait_ns(
            [steady_step_windows(steady[pid]) for pid in ranks], [waits[pid] for pid in ranks]
        )
        if together is not None:
            steady_wait = max(steady_wait, together)
    # A STEP without its WAIT is unknown, never zero (docs/hooks.md): where one process's
    # steady steps were timed only in part, their wait is read from the first timed to the last.
    step_spans = sum(len(runs) for runs in entry.steps.values())
    wait_spans = sum(len(runs) for runs in entry.waits.values())
    if 0 < wait_spans < step_spans and busiest is not None and pids == {busiest_pid}:
        watched_ns = watched_steady_ns(waits[busiest_pid], busiest)
        if 0 < watched_ns < busiest.time_ns:
            steady_wait *= busiest.time_ns / watched_ns
    # One process's wait (or the slowest rank's) has a longest stretch; an average over a
    # stepping process and a reader's has none (0: no stall is told apart).
    lone = len(ranks) >= 2 or pids <= {busiest_pid}
    told = lone and waiting_pid in steady
    longest_ns = longest_steady_wait_ns(waits[waiting_pid], steady[waiting_pid]) if told else 0
    paused_ns = (
        paused_steady_wait_ns(waits[waiting_pid], steady[waiting_pid], pauses[waiting_pid])
        if told and waiting_pid in pauses
        else 0
    )
    steady_ns = busiest.time_ns if busiest else 0
    # Retraces in warm-up steps are already outside the steady time; those amid it come out.
    retraces, retraced_all_ns = 0, 0
    traced = facts.traces.get(busiest_pid, ()) if busiest is not None else ()
    if traced and busiest is not None:
        busiest_waits = waits[busiest_pid]
        retraces, retraced_all_ns = retraced_ns(busiest_waits, extent, traced)
        steady_ns = max(steady_ns - retraced_ns(busiest_waits, busiest.intervals, traced)[1], 0)
    thread = (
        thread_ns_within(threads[busiest_pid], busiest.intervals)
        if busiest is not None and busiest_pid in threads
        else None
    )
    processes = _processes(entry, steady, waits, (p50, p95))
    gaps_ns = [step_gaps_ns(entry.steps[pid], waits[pid], extent) for pid in entry.steps]
    gap_ns = sum(gaps_ns) / len(gaps_ns) if gaps_ns else 0.0
    # The fraction is measured only where WAITs exist, and `coverage` says for what share of
    # the steps.
    measured = wait_spans > 0
    coverage = min(wait_spans / step_spans, 1.0) if step_spans else (1.0 if measured else None)
    return PhaseStats(
        name=name,
        time_s=time_ns / NS_PER_S,
        share=time_ns / run_ns if run_ns > 0 else 0.0,
        steps=steps,
        step_time_p50_s=p50,
        step_time_p95_s=p95,
        data_wait_s=wait_ns / NS_PER_S,
        data_wait_fraction=_wait_fraction(measured, steady_wait, steady_ns, wait_ns, time_ns),
        data_wait_coverage=coverage if measured or step_spans else None,
        step_gap_s=gap_ns / NS_PER_S,
        rounds=max((len(rounds_of(spans, [])) for spans in entry.phase_by_pid.values()), default=0),
        intervals=tuple(extent),
        steady_time_s=steady_ns / NS_PER_S if busiest else None,
        steady_steps=busiest.steps if busiest else 0,
        steady_data_wait_s=steady_wait / NS_PER_S,
        steady_wait_longest_s=longest_ns / NS_PER_S,
        steady_wait_gc_s=paused_ns / NS_PER_S,
        retraces=retraces,
        retraced_s=retraced_all_ns / NS_PER_S,
        steady_thread_run_s=None if thread is None else thread[0] / NS_PER_S,
        steady_core_wait_s=None if thread is None else thread[1] / NS_PER_S,
        one_time_s=max(time_ns - steady_ns, 0) / NS_PER_S if busiest else 0.0,
        warmup_steps=busiest.warmup_steps if busiest else 0,
        warmup_s=busiest.warmup_ns / NS_PER_S if busiest else 0.0,
        cold_round_s=busiest.cold_round_ns / NS_PER_S if busiest else 0.0,
        cold_round_steps=busiest.cold_round_steps if busiest else 0,
        lead_in_s=busiest.lead_in_ns / NS_PER_S if busiest else 0.0,
        input_end_s=busiest.input_end_ns / NS_PER_S if busiest else 0.0,
        repeated_warmup_s=busiest.repeated_ns / NS_PER_S if busiest else 0.0,
        rounds_warmed=busiest.rounds_warmed if busiest else 0,
        processes=processes,
    )


def _processes(
    entry: _PhaseSpans,
    steady: Mapping[int | None, SteadyState],
    waits: Mapping[int | None, SortedRuns],
    phase_percentiles: tuple[float | None, float | None],
) -> tuple[ProcessPhase, ...]:
    """Each stepping process's own figures, the busiest first (a lone process's step times are
    the phase's: not sorted twice)."""
    result = []
    for pid, runs in entry.steps.items():
        state = steady[pid]
        p50, p95 = (
            phase_percentiles
            if len(entry.steps) == 1
            else step_percentiles([state.runs], (0.50, 0.95))
        )
        timed = pid in entry.waits and len(entry.waits[pid]) > 0
        result.append(
            ProcessPhase(
                pid=pid,
                steps=runs.step_count(),
                steady_steps=state.steps,
                steady_time_s=state.time_ns / NS_PER_S,
                steady_data_wait_s=(
                    steady_wait_ns(waits[pid], state) / NS_PER_S if timed else None
                ),
                step_time_p50_s=p50,
                step_time_p95_s=p95,
            )
        )
    return tuple(sorted(result, key=lambda p: (-p.steps, p.pid or 0)))


def _wait_fraction(
    measured: bool, steady_wait: float, steady_ns: int, wait_ns: float, time_ns: int
) -> float | None:
    """The steady steps' wait over their time; the whole phase's where no step is steady."""
    if not measured:
        return None
    if steady_ns > 0:
        return min(steady_wait / steady_ns, 1.0)
    return wait_ns / time_ns if time_ns > 0 else 0.0


class _SpanSource(Protocol):
    """The part of `Recording` `recording_phase_stats` reads."""

    def span_columns(self, kind: SpanKind | None = None) -> Iterable[SpanColumns]: ...


def recording_phase_stats(
    recording: _SpanSource,
    run_start_ns: int,
    run_end_ns: int,
) -> dict[str, PhaseStats]:
    """Named phases in order of first appearance, then "data_wait" (if any) and "other", from
    every span of a recording read as stored columns (a day's million steps: a few seconds and
    tens of MB, where an object per span would take minutes and a GB)."""
    return CollectedPhases.read(recording).stats(run_start_ns, run_end_ns)


class CollectedPhases:
    """A recording's spans, by phase: the phases' intervals as soon as the spans that mark them
    are in, their statistics once every span is (what needs only the intervals, the GPU
    alignment, can start first)."""

    def __init__(self) -> None:
        self._by_phase: dict[str, _PhaseSpans] = defaultdict(_PhaseSpans)

    @classmethod
    def read(cls, recording: _SpanSource, kind: SpanKind | None = None) -> CollectedPhases:
        """Every span of `recording` (of one `kind`)."""
        collected = cls()
        collected.add(recording, kind)
        return collected

    def add(self, recording: _SpanSource, kind: SpanKind | None = None) -> None:
        """The spans of `kind` (of every kind) of `recording`, not added before."""
        _collect_columns(recording.span_columns(kind), self._by_phase)

    def _named(self) -> dict[str, _PhaseSpans]:
        ordered = sorted(self._by_phase.items(), key=lambda item: item[1].first_ns or 0)
        return {name: entry for name, entry in ordered if name}

    def intervals(self) -> dict[str, list[Interval]]:
        """Each named phase's time, in order of first appearance (`PhaseStats.intervals`)."""
        return {name: union(_extent(entry)) for name, entry in self._named().items()}

    def stats(
        self,
        run_start_ns: int,
        run_end_ns: int,
        pauses: Mapping[int | None, Sequence[Interval]] | None = None,
        threads: Mapping[int | None, ThreadTimes] | None = None,
        traces: Mapping[int | None, Sequence[Interval]] | None = None,
    ) -> dict[str, PhaseStats]:
        """`recording_phase_stats`; `pauses`: each process's full garbage collections;
        `threads`: each process's main-thread readings (hooks/core_waits.py); `traces`: each
        process's calls that traced or compiled a step function again (the "retrace" events
        of hooks/tf_traces.py, jax_compiles.py, torch_compiles.py)."""
        return _from_collected(
            self._named(),
            self._by_phase,
            run_start_ns,
            run_end_ns,
            _ProcessFacts(pauses or {}, threads or {}, traces or {}),
        )


def _from_collected(
    named: dict[str, _PhaseSpans],
    by_phase: dict[str, _PhaseSpans],
    run_start_ns: int,
    run_end_ns: int,
    facts: _ProcessFacts,
) -> dict[str, PhaseStats]:
    run_ns = max(run_end_ns - run_start_ns, 0)
    phases = {name: _phase_stats(name, entry, run_ns, facts) for name, entry in named.items()}
    step_starts = [
        runs.ordered().starts
        for entry in by_phase.values()
        for runs in entry.steps.values()
        if len(runs)
    ]
    for name, phase in phases.items():
        phases[name] = replace(phase, resume_s=_resume(phase.intervals, step_starts))
    return with_pseudo_phases(phases, run_start_ns, run_end_ns)


def with_pseudo_phases(
    phases: dict[str, PhaseStats], run_start_ns: int, run_end_ns: int
) -> dict[str, PhaseStats]:
    """`phases` plus `data_wait` (all wait, part of the phases it falls in) and `other` (the
    run's time in no phase)."""
    run_ns = max(run_end_ns - run_start_ns, 0)
    other = other_intervals([p.intervals for p in phases.values()], run_start_ns, run_end_ns)
    wait_s = sum(p.data_wait_s for p in phases.values())
    if wait_s > 0:
        waiting = [p for p in phases.values() if p.data_wait_s > 0]
        phases[DATA_WAIT] = PhaseStats(
            name=DATA_WAIT,
            time_s=wait_s,
            share=wait_s * NS_PER_S / run_ns if run_ns else 0.0,
            steps=0,
            step_time_p50_s=None,
            step_time_p95_s=None,
            data_wait_s=wait_s,
            data_wait_fraction=None,
            step_gap_s=0.0,
            rounds=len(waiting),
        )
    other_ns = total_ns(other)
    phases[OTHER] = PhaseStats(
        name=OTHER,
        time_s=other_ns / NS_PER_S,
        share=other_ns / run_ns if run_ns else 0.0,
        steps=0,
        step_time_p50_s=None,
        step_time_p95_s=None,
        data_wait_s=0.0,
        data_wait_fraction=None,
        step_gap_s=0.0,
        rounds=0,
        intervals=tuple(other),
    )
    return phases


def other_intervals(
    phase_intervals: Iterable[Sequence[Interval]], run_start_ns: int, run_end_ns: int
) -> list[Interval]:
    """The run's time in no phase ("other")."""
    if run_end_ns <= run_start_ns:
        return []
    covered = clip(
        union(i for intervals in phase_intervals for i in intervals), run_start_ns, run_end_ns
    )
    return subtract([(run_start_ns, run_end_ns)], covered)


def _resume(
    intervals: Sequence[Interval],
    step_starts: Sequence[Sequence[int]],
) -> tuple[float, ...]:
    """For each interval, seconds from its end to the first step starting after it (0 if none,
    or if the phase itself comes back first)."""
    gaps = []
    for k, first in enumerate(resume_ns(intervals, step_starts)):
        end = intervals[k][1]
        following = intervals[k + 1][0] if k + 1 < len(intervals) else None
        if first is not None and (following is None or end + first <= following):
            gaps.append(first / NS_PER_S)
        else:
            gaps.append(0.0)
    return tuple(gaps)
