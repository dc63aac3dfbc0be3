"""Per-phase statistics from spans: time, shares, steps, percentiles, data wait, gaps."""

from __future__ import annotations

import pytest
from constructed import phase_stats

from gpuwhy.analysis.phases import DATA_WAIT, OTHER, weighted_percentile
from gpuwhy.model import Span, SpanKind

MS = 1_000_000
S = 1_000_000_000


def _loop(
    phase: str,
    start: int,
    steps: int,
    wait: int,
    step: int,
    pid: int | None = None,
) -> tuple[list[Span], int]:
    spans, t = [], start
    for i in range(steps):
        spans.append(Span(phase, SpanKind.WAIT, t, t + wait, step=i, pid=pid))
        t += wait
        spans.append(Span(phase, SpanKind.STEP, t, t + step, step=i, pid=pid))
        t += step
    return spans, t


def test_named_phases_and_other_partition_the_run() -> None:
    train, end = _loop("train", 1 * S, 10, 60 * MS, 40 * MS)
    spans = [
        Span("train", SpanKind.PHASE, 1 * S, end),
        *train,
        Span("validation", SpanKind.PHASE, end, end + S),
    ]
    phases = phase_stats(spans, 0, 4 * S)
    assert list(phases) == ["train", "validation", DATA_WAIT, OTHER]
    shares = sum(p.share for p in phases.values() if p.name != DATA_WAIT)
    assert shares == pytest.approx(1.0)
    assert phases["train"].time_s == pytest.approx(1.0)
    assert phases["train"].steps == 10
    assert phases["train"].data_wait_fraction == pytest.approx(0.6)
    assert phases["train"].step_time_p50_s == pytest.approx(0.04)
    assert phases[DATA_WAIT].time_s == pytest.approx(0.6)
    assert phases[OTHER].time_s == pytest.approx(2.0)
    assert phases["validation"].data_wait_fraction is None  # no steps to wait for


def test_span_covering_n_steps_counts_n_steps_of_its_average_time() -> None:
    # Keras steps_per_execution=4: one span per 4 steps (references.md#keras-steps-per-execution).
    spans = [
        Span("train", SpanKind.STEP, 0, 400 * MS, step=0, steps=4),
        Span("train", SpanKind.STEP, 400 * MS, 500 * MS, step=4, steps=1),
    ]
    phase = phase_stats(spans, 0, S)["train"]
    assert phase.data_wait_fraction is None  # no WAIT: the input was not timed
    assert phase.steps == 5
    assert phase.step_time_p50_s == pytest.approx(0.1)
    assert weighted_percentile([(0.1, 4), (0.5, 1)], 0.95) == 0.5
    assert weighted_percentile([], 0.5) is None


def test_phase_without_phase_spans_spans_its_steps() -> None:
    spans, _ = _loop("train", S, 5, 10 * MS, 90 * MS)
    phase = phase_stats(spans, 0, 2 * S)["train"]
    assert phase.time_s == pytest.approx(0.5)
    assert phase.data_wait_fraction == pytest.approx(0.1)
    assert phase.rounds == 0


def test_ranks_waiting_together_count_once() -> None:
    rank0, end = _loop("train", 0, 10, 50 * MS, 50 * MS, pid=1)
    rank1, _ = _loop("train", 0, 10, 50 * MS, 50 * MS, pid=2)
    phase = phase_stats([Span("train", SpanKind.PHASE, 0, end), *rank0, *rank1], 0, end)["train"]
    assert phase.steps == 10
    assert phase.data_wait_fraction == pytest.approx(0.5)


def test_step_gaps_exclude_waits_and_phase_boundaries() -> None:
    spans = [
        Span("train", SpanKind.PHASE, 0, 300 * MS),
        Span("train", SpanKind.STEP, 0, 100 * MS),
        Span("train", SpanKind.WAIT, 120 * MS, 150 * MS),
        Span("train", SpanKind.STEP, 150 * MS, 250 * MS),
        Span("train", SpanKind.PHASE, 500 * MS, 700 * MS),  # second epoch
        Span("train", SpanKind.STEP, 500 * MS, 600 * MS),
    ]
    phase = phase_stats(spans, 0, S)["train"]
    assert phase.step_gap_s == pytest.approx(0.02)  # 100..120 only; 250..500 crosses epochs
    assert phase.rounds == 2


def test_no_spans_leaves_only_other() -> None:
    phases = phase_stats([], 0, 3 * S)
    assert list(phases) == [OTHER]
    assert phases[OTHER].share == pytest.approx(1.0)


def test_a_step_without_its_wait_is_unknown_and_a_zero_wait_is_zero() -> None:
    # docs/hooks.md: one WAIT per measured STEP, zero long when it did not wait.
    steps = [
        Span("train", SpanKind.STEP, i * 100 * MS, (i + 1) * 100 * MS, step=i) for i in range(10)
    ]
    untimed = phase_stats(steps, 0, S)["train"]
    assert untimed.data_wait_fraction is None and untimed.data_wait_coverage == 0.0
    zeros = [Span("train", SpanKind.WAIT, s.start_ns, s.start_ns, step=s.step) for s in steps]
    timed = phase_stats(steps + zeros, 0, S)["train"]
    assert timed.data_wait_fraction == 0.0 and timed.data_wait_coverage == 1.0
    # Four steps of ten timed (a loop's generator found late): the 50 ms they waited is read
    # over their 400 ms, not over the untimed steps' time too, and the coverage says how much.
    half = phase_stats(steps + zeros[:4] + [Span("train", SpanKind.WAIT, 0, 50 * MS)], 0, S)
    assert half["train"].data_wait_fraction == pytest.approx(0.125)
    assert half["train"].steady_data_wait_s == pytest.approx(0.125)
    assert half["train"].data_wait_s == pytest.approx(0.05)  # what was measured
    assert half["train"].data_wait_coverage == pytest.approx(0.5)
    # The timed steps last in the phase (a generator found three steps in), waiting half of each.
    late = [Span("train", SpanKind.WAIT, s.start_ns, s.start_ns + 50 * MS) for s in steps[3:]]
    assert phase_stats(steps + late, 0, S)["train"].data_wait_fraction == pytest.approx(0.5)
    # Two optimizer steps on each batch (a GAN's): a read every other step, of 50 ms, the
    # steps between read nothing: a quarter of the time waited, not half. The last step, after
    # the last read, is unknown as those before the first read are: 250 ms over 900.
    paired = [Span("train", SpanKind.WAIT, s.start_ns, s.start_ns + 50 * MS) for s in steps[::2]]
    gan = phase_stats(steps + paired, 0, S)["train"]
    assert gan.data_wait_fraction == pytest.approx(250 / 900)
    assert gan.steady_data_wait_s == pytest.approx(250 / 900)
    # Found three steps in: the untimed steps before the first read stay unknown.
    odd = [Span("train", SpanKind.WAIT, s.start_ns, s.start_ns + 50 * MS) for s in steps[3::2]]
    found = phase_stats(steps + odd, 0, S)["train"]
    assert found.data_wait_fraction == pytest.approx(200 / 700)


def test_resume_is_the_time_from_a_phase_interval_to_the_next_step() -> None:
    spans = [
        Span("train", SpanKind.PHASE, 0, 100 * MS),
        Span("train", SpanKind.STEP, 0, 100 * MS),
        Span("validation", SpanKind.PHASE, 100 * MS, 200 * MS),
        Span("train", SpanKind.PHASE, 200 * MS, 400 * MS),
        Span("train", SpanKind.STEP, 350 * MS, 400 * MS),  # training resumes 150 ms later
        Span("validation", SpanKind.PHASE, 400 * MS, 500 * MS),  # the last: nothing follows
    ]
    phases = phase_stats(spans, 0, S)
    assert phases["validation"].resume_s == pytest.approx((0.15, 0.0))
