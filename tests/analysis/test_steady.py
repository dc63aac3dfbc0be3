"""Steady-state steps apart from one-time work (steady.py), on constructed spans and recordings."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest
from constructed import Run, SpanList, phase_stats

from gpuwhy.analysis import diagnose, whatif
from gpuwhy.analysis.phases import CollectedPhases
from gpuwhy.analysis.steady import WARMUP_FACTOR, _cold_first_round
from gpuwhy.model import Severity, Span, SpanKind

MS = 1_000_000
S = 1_000_000_000


def _round(start: int, durations_ms: list[float], wait_ms: float, lead_in_ms: float = 0.0):
    """A round (an epoch): its PHASE span and steps that each begin with their wait, as the
    hooks record them (a STEP covers its own wait). Returns (spans, end)."""
    spans: list[Span] = []
    t = start + round(lead_in_ms * MS)
    for index, duration in enumerate(durations_ms):
        end = t + round(duration * MS)
        spans.append(Span("train", SpanKind.STEP, t, end, step=index))
        spans.append(Span("train", SpanKind.WAIT, t, t + round(wait_ms * MS), step=index))
        t = end
    spans.append(Span("train", SpanKind.PHASE, start, t))
    return spans, t


def test_a_traced_first_step_and_the_lead_in_are_one_time_work() -> None:
    # Keras's first fit: 300 ms lead-in (iterator set-up), a 900 ms first step (tracing), then
    # 99 steps of 20 ms, 12 of them waiting for data.
    spans, end = _round(0, [900.0] + [20.0] * 99, wait_ms=12, lead_in_ms=300)
    train = phase_stats(spans, 0, end)["train"]
    assert train.time_s == pytest.approx(0.3 + 0.9 + 99 * 0.02)
    assert train.steady_time_s == pytest.approx(99 * 0.02)
    assert train.steady_steps == 99 and train.steps == 100
    assert train.warmup_steps == 1 and train.warmup_s == pytest.approx(0.9)
    assert train.lead_in_s == pytest.approx(0.3)
    assert train.one_time_s == pytest.approx(1.2)
    assert train.rounds_warmed == 1
    # Per-step figures describe the steady steps: 12 of 20 ms waiting, a 20 ms step even at p95.
    assert train.data_wait_fraction == pytest.approx(0.6)
    assert train.steady_data_wait_s == pytest.approx(99 * 0.012)
    assert train.data_wait_s == pytest.approx(100 * 0.012)  # all the wait, as measured
    assert train.step_time_p95_s == pytest.approx(0.02)


def test_warm_up_in_every_round_is_counted_per_round() -> None:
    first, t = _round(0, [500.0, 20.0, 20.0, 20.0], wait_ms=5)
    second, end = _round(t, [400.0, 20.0, 20.0, 20.0], wait_ms=5, lead_in_ms=50)
    train = phase_stats(first + second, 0, end)["train"]
    assert train.rounds == 2 and train.rounds_warmed == 2 and train.warmup_steps == 2
    assert train.warmup_s == pytest.approx(0.9)
    assert train.steady_time_s == pytest.approx(6 * 0.02)
    assert train.one_time_s == pytest.approx(0.9 + 0.05)
    assert train.data_wait_fraction == pytest.approx(0.25)


def test_each_rank_s_rounds_are_its_own() -> None:
    """Two ranks end each epoch a moment apart (one finishes its epoch 0.3 ms after the other
    began its next): their rounds must not merge into one, or the time between epochs (a long
    epoch end, here 480 ms) would count as steady and dilute every per-step figure."""

    def rank(pid: int, offset_ms: float) -> list[Span]:
        spans: list[Span] = []
        t = round(offset_ms * MS)
        for epoch_end_ms in (480.0, 10.0):
            start = t
            for index in range(8):
                spans.append(Span("train", SpanKind.WAIT, t, t + 10 * MS, step=index, pid=pid))
                spans.append(Span("train", SpanKind.STEP, t, t + 20 * MS, step=index, pid=pid))
                t += 20 * MS
            t += round(epoch_end_ms * MS)
            spans.append(Span("train", SpanKind.PHASE, start, t, pid=pid))
        return spans

    # Rank 2 starts 13 ms late and ends its first epoch 0.3 ms after rank 1 began its second.
    late = rank(2, 13.0)
    first_end = max(s.end_ns for s in late if s.kind is SpanKind.PHASE and s.start_ns < 100 * MS)
    early = rank(1, (first_end - 0.3 * MS - (8 * 20 + 480) * MS) / MS)
    train = phase_stats(early + late, 0, 2 * S)["train"]
    assert train.rounds == 2
    assert train.steady_time_s == pytest.approx(16 * 0.02)  # the steps, not the epoch end
    assert train.data_wait_fraction == pytest.approx(0.5)
    assert train.one_time_s > 0.48


def _ranks_waiting_by_turns(offset_ms: float) -> list[Span]:
    """Two ranks of 20 steps of 20 ms, rank 1 started `offset_ms` after rank 0: rank 0 waits
    10 ms at its even steps, rank 1 at its odd ones."""
    spans: list[Span] = []
    for pid, turn in ((1, 0), (2, 1)):
        t = round(offset_ms * MS) * (pid - 1)
        start = t
        for index in range(20):
            wait = 10 * MS if index % 2 == turn else 0
            spans.append(Span("train", SpanKind.WAIT, t, t + wait, step=index, pid=pid))
            spans.append(Span("train", SpanKind.STEP, t, t + 20 * MS, step=index, pid=pid))
            t += 20 * MS
        spans.append(Span("train", SpanKind.PHASE, start, t, pid=pid))
    return spans


def test_ranks_in_lockstep_wait_at_each_step_as_long_as_the_slowest() -> None:
    """In lockstep (each step's collective holds every rank until the last arrives), ranks slow
    by turns make the job wait at every step: 10 of 20 ms, where each rank alone waits at
    half of its steps."""
    train = phase_stats(_ranks_waiting_by_turns(0.5), 0, 2 * S)["train"]
    assert train.data_wait_fraction == pytest.approx(0.5, abs=0.01)


def test_ranks_not_in_lockstep_are_not_paired_step_by_step() -> None:
    # Rank 1 runs 30 ms, more than a step, behind: its steps never meet rank 0's step by step.
    train = phase_stats(_ranks_waiting_by_turns(30.0), 0, 2 * S)["train"]
    assert train.data_wait_fraction == pytest.approx(0.25, abs=0.01)


def test_uniformly_slow_steps_stay_steady() -> None:
    # No step is 3x the median: nothing is warm-up, however slow the first ones are.
    spans, end = _round(0, [55.0, 50.0, 20.0, 20.0, 20.0], wait_ms=10)
    train = phase_stats(spans, 0, end)["train"]
    assert train.warmup_steps == 0 and train.one_time_s == pytest.approx(0.0)
    assert train.steady_time_s == pytest.approx(train.time_s)


def test_at_most_half_of_a_rounds_steps_are_warm_up() -> None:
    # A later round whose steps are all far slower than the phase's median (another round sets
    # it) keeps at least half of them steady.
    fast, t = _round(0, [10.0] * 20, wait_ms=0)
    slow, end = _round(t, [200.0] * 4, wait_ms=0)
    train = phase_stats(fast + slow, 0, end)["train"]
    assert train.warmup_steps == 2 and train.cold_round_steps == 0


def test_a_cold_first_round_is_one_time_work_as_a_whole(tmp_path: Path) -> None:
    # A tf.data map followed by `cache()`: the first epoch's 20 pulls run the 11 ms map, the
    # three later epochs read the cache (0.3 ms of a 1.3 ms step).
    spans, t = _round(0, [12.0] * 20, wait_ms=11)
    for _ in range(3):
        later, t = _round(t, [1.3] * 20, wait_ms=0.3)
        spans += later
    train = phase_stats(spans, 0, t)["train"]
    assert train.cold_round_steps == 20 and train.cold_round_s == pytest.approx(0.24)
    assert train.warmup_steps == 0 and train.rounds_warmed == 0
    assert train.steady_steps == 60 and train.steady_time_s == pytest.approx(60 * 0.0013)
    assert train.one_time_s == pytest.approx(0.24)
    assert train.data_wait_fraction == pytest.approx(0.3 / 1.3)  # the cached epochs' wait
    assert train.repeated_warmup_s == pytest.approx(0.0)
    run = Run(tmp_path / "r.db", duration_s=1.0)
    run.event(0.01, "hook", "tf.data", framework="tensorflow")
    begin = 0.05
    t = run.steps("train", begin, 20, 0.012, wait_s=0.011)
    run.phase("train", begin, t)
    for _ in range(3):
        start = t
        t = run.steps("train", t, 20, 0.0013, wait_s=0.0003)
        run.phase("train", start, t)
    with run.close() as recording:
        diagnosis = diagnose(recording)
    by_code = {f.code: f for f in diagnosis.findings}
    once = by_code["ONE_TIME_WORK"]
    assert "a first round slower than the later ones" in once.title
    assert once.evidence["cold_round_steps"] == 20
    assert "ds.cache('/path/to/cache')" in once.fix and once.speedup is None
    # The cached epochs wait 18 ms in all, under 2 % of the run: the filling epoch's 220 ms of
    # waiting is no input-bound finding (half of it counted as steady steps would have made one).
    assert "INPUT_BOUND" not in by_code


def test_a_first_round_under_three_times_slower_and_waiting_alike_is_not_cold() -> None:
    spans, t = _round(0, [2.5] * 20, wait_ms=0.5)  # waits 2.5x as long: under 3x
    later, end = _round(t, [1.0] * 20, wait_ms=0.2)
    train = phase_stats(spans + later, 0, end)["train"]
    assert train.cold_round_steps == 0 and train.steady_steps == 40


def test_a_first_round_that_waited_for_its_input_is_cold_though_under_three_times_slower() -> None:
    # A step that computes longer than the input takes to make (a prefetch runs the map beside
    # it): the cache-filling epoch's steps are 1.9x slower, waiting 4.8 ms of 10.5 (46 %), the
    # cached epochs' 0.5 ms of 5.4 (tests/scenarios/test_cold_round.py measures this job).
    spans, t = _round(0, [10.5] * 20, wait_ms=4.8)
    for _ in range(3):
        later, t = _round(t, [5.4] * 20, wait_ms=0.5)
        spans += later
    train = phase_stats(spans, 0, t)["train"]
    assert train.cold_round_steps == 20 and train.steady_steps == 60
    assert train.data_wait_fraction == pytest.approx(0.5 / 5.4)


def test_a_cache_filled_in_bursts_is_cold_though_its_median_step_waits_little() -> None:
    # Parallel reads fill the cache in bursts (examples/keras_slow_input.py --fixed): a step
    # waits for a read, then three find theirs made. Measured there: the filling epoch's median
    # step 13-18 ms against 10 ms cached, its median wait 1-5 ms, yet 45 % of its time waiting.
    spans: list[Span] = []
    t = 0
    for _ in range(5):
        part, t = _round(t, [50.0], wait_ms=40)
        more, t = _round(t, [10.0] * 3, wait_ms=0.2)
        spans += [s for s in part + more if s.kind != SpanKind.PHASE]
    spans.append(Span("train", SpanKind.PHASE, 0, t))
    for _ in range(3):
        later, t = _round(t, [10.0] * 20, wait_ms=0.2)
        spans += later
    train = phase_stats(spans, 0, t)["train"]
    assert train.cold_round_steps == 20 and train.steady_steps == 60
    assert train.data_wait_fraction == pytest.approx(0.02)


def test_a_later_round_s_wait_for_its_input_to_end_does_not_hide_a_cold_round() -> None:
    # The last epoch's end pull also waits for its tf.data iterator to be destroyed (75 ms):
    # once per round, not its steps' waits (before, it tipped the later rounds' average).
    spans, t = _round(0, [10.5] * 20, wait_ms=4.8)
    for last in (False, False, True):
        later, t = _round(t, [5.4] * 19 + [80.4 if last else 5.4], wait_ms=0.5)
        spans += later
    spans.append(Span("train", SpanKind.WAIT, t - 75 * MS, t, step=79, steps=0))
    train = phase_stats(spans, 0, t)["train"]
    assert train.cold_round_steps == 20 and train.input_end_s == pytest.approx(0.075)


def test_a_later_round_s_start_up_wait_does_not_hide_a_cold_round() -> None:
    # A cached epoch's first pull starts its iterator again (155 ms, seen under
    # tests/scenarios/test_cold_round.py): a warm-up step, once per round; counted as its
    # steps' wait, it tripled the later rounds' average and the filling epoch passed as steady.
    spans, t = _round(0, [10.5] * 20, wait_ms=5.4)
    later, t = _round(t, [160.0] + [5.4] * 19, wait_ms=0.5)
    spans += later
    spans.append(Span("train", SpanKind.WAIT, later[0].start_ns, later[0].start_ns + 155 * MS))
    for _ in range(2):
        later, t = _round(t, [5.4] * 20, wait_ms=0.5)
        spans += later
    train = phase_stats(spans, 0, t)["train"]
    assert train.cold_round_steps == 20 and train.warmup_steps == 1
    assert train.data_wait_fraction == pytest.approx(0.5 / 5.4)


def test_a_first_round_waiting_a_sliver_of_its_steps_is_not_cold() -> None:
    # 5x the later rounds' wait, but 15 % of its step: under the highly input-bound line.
    spans, t = _round(0, [10.0] * 20, wait_ms=1.5)
    later, end = _round(t, [9.0] * 20, wait_ms=0.3)
    train = phase_stats(spans + later, 0, end)["train"]
    assert train.cold_round_steps == 0 and train.steady_steps == 40


def test_one_long_first_wait_does_not_make_a_round_cold() -> None:
    # Workers starting before the first batch: one step's wait, not the round's steps'.
    first, t = _round(0, [400.0] + [5.0] * 19, wait_ms=0.5)
    first.append(Span("train", SpanKind.WAIT, round(0.5 * MS), 390 * MS, step=0))
    later, end = _round(t, [5.0] * 20, wait_ms=0.5)
    train = phase_stats(first + later, 0, end)["train"]
    assert train.cold_round_steps == 0 and train.warmup_steps == 1


def test_a_single_round_is_never_cold() -> None:
    spans, end = _round(0, [12.0] * 10 + [1.0] * 30, wait_ms=0.5)
    train = phase_stats(spans, 0, end)["train"]
    assert train.cold_round_steps == 0 and train.steady_steps >= 30


def test_warm_up_after_a_cold_first_round_is_all_repeated() -> None:
    # Each later epoch starts its iterator again (a 50 ms first step): the cold first round is
    # the start-up, so every later warm-up is work a change removes.
    spans, t = _round(0, [12.0] * 20, wait_ms=11)
    for _ in range(2):
        later, t = _round(t, [50.0] + [1.0] * 20, wait_ms=0.2)
        spans += later
    train = phase_stats(spans, 0, t)["train"]
    assert train.cold_round_steps == 20 and train.rounds_warmed == 2
    assert train.repeated_warmup_s == pytest.approx(2 * 0.05)


def test_a_wait_kept_before_its_step_starts_the_steady_interval() -> None:
    # Recordings that keep a step's wait apart, just before it, lose no wait at the start.
    spans = []
    t = 0
    for index in range(10):
        spans.append(Span("train", SpanKind.WAIT, t, t + 60 * MS, step=index))
        spans.append(Span("train", SpanKind.STEP, t + 60 * MS, t + 100 * MS, step=index))
        t += 100 * MS
    spans.append(Span("train", SpanKind.PHASE, 0, t))
    train = phase_stats(spans, 0, t)["train"]
    assert train.steady_time_s == pytest.approx(1.0)
    assert train.data_wait_fraction == pytest.approx(0.6)


def test_input_bound_estimates_from_steady_steps_and_gives_the_phase_speedup(
    tmp_path: Path,
) -> None:
    run = Run(tmp_path / "r.db", duration_s=10)
    run.phase("train", 1.0, 2.0)  # one-time: 1 s before the steps
    run.steps("train", 2.0, 1, 0.8, wait_s=0.2)  # a warm-up step: 1 s, 0.2 s of it a wait
    end = run.steps("train", 3.0, 100, 0.02, wait_s=0.03)  # 3 .. 8 s: 60 % waiting
    run.phase("train", 2.0, end)
    with run.close() as recording:
        diagnosis = diagnose(recording)
    top = diagnosis.findings[0]
    assert top.code == "INPUT_BOUND"
    assert top.evidence["data_wait_fraction"] == pytest.approx(0.6)
    assert top.evidence["phase_speedup"] == pytest.approx(2.5)
    assert top.evidence["steady_time_s"] == pytest.approx(5.0)
    assert top.evidence["data_wait_s"] == pytest.approx(3.0)  # the warm-up's wait stays
    assert top.speedup == pytest.approx(10 / (10 - 3.0), rel=1e-3)
    assert whatif.phase_speedup(5.0, 3.0) == pytest.approx(2.5)


def test_one_time_work_in_every_round_is_a_warning_with_its_estimate(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=12)
    run.event(0.5, "hook", "keras integration", framework="keras", backend="tensorflow")
    t = 1.0
    for _ in range(4):  # fit in a loop: each call's first step traces again (1.5 s)
        start = t
        t = run.steps("train", t, 1, 1.5)
        t = run.steps("train", t, 50, 0.02)
        run.phase("train", start, t)
    with run.close() as recording:
        diagnosis = diagnose(recording)
    finding = next(f for f in diagnosis.findings if f.code == "ONE_TIME_WORK")
    assert finding.severity is Severity.WARNING
    assert finding.evidence["rounds_warmed"] == 4 and finding.evidence["warmup_steps"] == 4
    assert finding.evidence["one_time_s"] == pytest.approx(6.0)
    assert "epochs=N" in finding.fix  # Keras: one fit instead of fit in a loop
    assert finding.speedup == pytest.approx(12 / (12 - 4.5), rel=1e-3)  # one warm-up stays


def test_one_time_work_of_the_first_round_only_is_information_without_estimate(
    tmp_path: Path,
) -> None:
    run = Run(tmp_path / "r.db", duration_s=5)
    t = run.steps("train", 1.0, 1, 2.0)  # compiling
    end = run.steps("train", t, 50, 0.02)
    run.phase("train", 1.0, end)
    with run.close() as recording:
        diagnosis = diagnose(recording)
    finding = next(f for f in diagnosis.findings if f.code == "ONE_TIME_WORK")
    assert finding.severity is Severity.INFO and finding.speedup is None
    assert finding.speedup_method and finding.speedup_method.startswith("not estimated")
    assert finding.evidence["one_time_fraction"] == pytest.approx(2 / 3, abs=1e-3)


def test_short_one_time_work_is_no_finding(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=12)
    t = run.steps("train", 1.0, 1, 0.2)
    end = run.steps("train", t, 500, 0.02)
    run.phase("train", 1.0, end)
    with run.close() as recording:
        diagnosis = diagnose(recording)
    assert "ONE_TIME_WORK" not in [f.code for f in diagnosis.findings]


def test_a_loops_wait_for_its_input_to_end_is_one_time_work() -> None:
    # A DataLoader's workers shut down when the last pull finds no more data: that pull is a
    # WAIT of 0 steps at the end of the last step, paid once per loop, not by every step.
    spans, end = _round(0, [20.0] * 9 + [320.0], wait_ms=5)
    last = max((s for s in spans if s.kind is SpanKind.STEP), key=lambda s: s.start_ns)
    spans.append(Span("train", SpanKind.WAIT, last.end_ns - 300 * MS, last.end_ns, last.step, 0))
    train = phase_stats(spans, 0, end)["train"]
    assert train.input_end_s == pytest.approx(0.3)
    assert train.steady_time_s == pytest.approx(0.2)
    assert train.one_time_s == pytest.approx(0.3)
    assert train.data_wait_fraction == pytest.approx(0.25)  # 5 of every 20 ms
    assert train.data_wait_s == pytest.approx(0.35)  # every wait, the input's end too


def _median_step(
    starts: list[int], ends: list[int], weights: list[int], indices: range | list[int]
) -> float:
    return statistics.median((ends[i] - starts[i]) / weights[i] for i in indices)


def test_the_cold_round_check_is_the_median_rule_without_sorting() -> None:
    """The check counts steps under the bound instead of sorting a million of them: the same
    answer as the medians themselves, ties and evenly split counts included."""
    rng = random.Random(7)
    for _ in range(400):
        sizes = [rng.randint(1, 9) for _ in range(rng.randint(2, 4))]
        starts: list[int] = []
        ends: list[int] = []
        weights: list[int] = []
        rounds: list[tuple[int, int]] = []
        t = 0
        for size in sizes:
            rounds.append((len(starts), len(starts) + size))
            for _ in range(size):
                weight = rng.choice((1, 1, 2))
                duration = rng.choice((10, 30, 90, 91, 270)) * weight  # ties on purpose
                starts.append(t)
                ends.append(t + duration)
                weights.append(weight)
                t += duration

        later = [i for first, stop in rounds[1:] for i in range(first, stop)]
        first_median = _median_step(starts, ends, weights, range(*rounds[0]))
        expected = first_median > WARMUP_FACTOR * _median_step(starts, ends, weights, later)
        assert _cold_first_round(starts, ends, weights, rounds) is expected, (sizes, rounds)


def test_only_the_collections_inside_steady_waits_count_as_their_time() -> None:
    # 20 steps of 20 ms, each waiting its first 5 ms; the first step traced (900 ms, warm-up).
    spans, end = _round(0, [900.0] + [20.0] * 20, wait_ms=5)
    pid_pauses = {
        None: [
            (100 * MS, 200 * MS),  # inside the warm-up step: not steady
            (900 * MS + 2 * MS, 900 * MS + 4 * MS),  # inside the first steady wait: 2 ms
            (920 * MS + 3 * MS, 920 * MS + 9 * MS),  # half in the next wait: 2 ms of 6
            (950 * MS, 955 * MS),  # in a step's compute: not wait
        ]
    }
    train = CollectedPhases.read(SpanList(spans)).stats(0, end, pid_pauses)["train"]
    assert train.steady_wait_gc_s == pytest.approx(0.004)
    assert phase_stats(spans, 0, end)["train"].steady_wait_gc_s == 0.0


def test_calls_that_traced_again_amid_the_steady_steps_are_one_time_work() -> None:
    # A traced first step (900 ms), then 40 steps of 20 ms, each waiting its first 5 ms; step
    # 20 traced its function again: 300 ms more, its call (after the wait) timed by the hooks.
    durations = [900.0] + [20.0] * 40
    durations[21] = 320.0
    spans, end = _round(0, durations, wait_ms=5)
    retrace_start = (900 + 20 * 20 + 5) * MS
    traces = {
        None: [
            (100 * MS, 800 * MS),  # in the first step: warm-up, already not steady
            (retrace_start, retrace_start + 315 * MS),
        ]
    }
    train = CollectedPhases.read(SpanList(spans)).stats(0, end, traces=traces)["train"]
    assert train.retraces == 2
    assert train.retraced_s == pytest.approx(0.7 + 0.315)  # with a step's 15 ms of compute
    assert train.steady_time_s == pytest.approx(40 * 0.020 + 0.300 - 0.315)
    assert train.data_wait_fraction == pytest.approx(40 * 0.005 / train.steady_time_s)
    assert train.one_time_s == pytest.approx(0.9 + 0.315)  # the warm-up step holds its own
    untraced = phase_stats(spans, 0, end)["train"]
    assert untraced.retraces == 0 and untraced.steady_time_s == pytest.approx(1.1)


def test_a_retrace_that_also_pulled_the_batch_leaves_its_wait_to_the_input() -> None:
    # Keras on TensorFlow pulls the batch inside the compiled call: the call that traced again
    # holds the step's 5 ms wait, which stays the input's.
    durations = [900.0] + [20.0] * 40
    durations[21] = 320.0
    spans, end = _round(0, durations, wait_ms=5)
    start = (900 + 20 * 20) * MS
    traces = {None: [(start, start + 320 * MS)]}
    train = CollectedPhases.read(SpanList(spans)).stats(0, end, traces=traces)["train"]
    assert train.retraced_s == pytest.approx(0.315)
    assert train.steady_data_wait_s == pytest.approx(40 * 0.005)


@pytest.mark.parametrize(
    ("framework", "said", "fix"),
    [
        ("tensorflow", "traced its tf.function again 200 times", "tf.constant"),
        ("jax", "compiled its jitted function again 200 times", "static_argnums"),
    ],
)
def test_retracing_at_every_step_is_named_with_its_fix_and_its_saving(
    tmp_path: Path, framework: str, said: str, fix: str
) -> None:
    # 200 steps of 25 ms, each a call that traced again for 24 ms of it (a Python number
    # passed to the step function), after a 1 s start-up.
    environment = {"facts": {"frameworks": {framework: "1.0"}}}
    run = Run(tmp_path / "r.db", duration_s=6.0, environment=environment)
    run.phase("train", 1.0, 6.0)
    run.steps("train", 1.0, 200, 0.025, wait_s=0.0, pid=7)
    for index in range(200):
        at = 1.0 + index * 0.025 + 0.0005
        run.event(at, "retrace", duration_ns=24_000_000, function="train_step", pid=7)
    diagnosis = diagnose(run.close())
    train = diagnosis.phases["train"]
    assert train.retraces == 200 and train.retraced_s == pytest.approx(4.8)
    (finding,) = [f for f in diagnosis.findings if f.code == "ONE_TIME_WORK"]
    assert finding.severity is Severity.WARNING
    assert said in finding.title
    assert fix in finding.fix
    assert finding.evidence["retraces"] == 200
    assert finding.speedup == pytest.approx(whatif.amdahl(6.0, 4.8), rel=1e-3)
    # The functions the retraces made are freed at exit, after the last step: not counted.
    assert finding.speedup_method.endswith("so the gain can be larger")


def test_one_retrace_is_a_second_shape_paid_once_not_a_pattern(tmp_path: Path) -> None:
    # A smaller last batch compiled the step once more (0.5 s of a 4 s run): like the first
    # compile, paid once per run; no warning, no estimate.
    run = Run(tmp_path / "r.db", duration_s=4.0, environment={"facts": {"frameworks": {}}})
    run.phase("train", 1.0, 4.0)
    run.steps("train", 1.0, 100, 0.025, wait_s=0.0, pid=7)
    run.event(2.0005, "retrace", duration_ns=500_000_000, function="train_step", pid=7)
    diagnosis = diagnose(run.close())
    assert diagnosis.phases["train"].retraces == 1
    found = [f for f in diagnosis.findings if f.code == "ONE_TIME_WORK"]
    assert all(f.severity is Severity.INFO and f.speedup is None for f in found)
    assert all("again" not in f.title for f in found)


def test_a_wait_that_is_a_sliver_of_steps_that_retrace_is_not_input_bound(tmp_path: Path) -> None:
    # Every step traces its function again (24 ms of its 25) and waits 0.3 ms for its batch:
    # what is left of the steady steps is mostly wait, yet the input is 1 % of the steps.
    environment = {"facts": {"frameworks": {"tensorflow": "2.21.0"}}}
    run = Run(tmp_path / "r.db", duration_s=6.0, environment=environment)
    run.phase("train", 1.0, 6.0)
    run.steps("train", 1.0, 200, 0.025, wait_s=0.0003, pid=7)
    for index in range(200):  # after each step's wait
        at = 1.0 + index * 0.025 + 0.0005
        run.event(at, "retrace", duration_ns=24_000_000, function="train_step", pid=7)
    diagnosis = diagnose(run.close())
    train = diagnosis.phases["train"]
    assert train.data_wait_fraction is not None and train.data_wait_fraction > 0.2
    codes = [f.code for f in diagnosis.findings]
    assert "ONE_TIME_WORK" in codes and "INPUT_BOUND" not in codes
