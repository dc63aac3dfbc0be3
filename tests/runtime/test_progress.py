"""StepMeter: step rate and input-wait share over the recent window, with an exact clock."""

from __future__ import annotations

import pytest

from gpuwhy.model import Event, Span, SpanKind
from gpuwhy.runtime.progress import WINDOW_NS, StepMeter
from gpuwhy.telemetry.nvml import GPU_PROCESS_EVENT
from gpuwhy.wire import PROCESS_EVENT

MS = 1_000_000


def _step(end_ms: int, duration_ms: int = 100, steps: int = 1) -> Span:
    return Span("train", SpanKind.STEP, (end_ms - duration_ms) * MS, end_ms * MS, steps=steps)


def _wait(end_ms: int, duration_ms: int) -> Span:
    return Span("train", SpanKind.WAIT, (end_ms - duration_ms) * MS, end_ms * MS)


def test_nothing_reported_yet() -> None:
    meter = StepMeter(clock=lambda: 0)
    meter.observe(Event(0, "hook", "x"))
    progress = meter.progress()
    assert (progress.steps_total, progress.steps_per_s, progress.wait_share) == (0, None, None)


def test_rate_counts_steps_completed_after_the_first_in_the_window() -> None:
    meter = StepMeter()
    for i in range(11):  # a step ends every 100 ms: 10 steps/s
        meter.observe(_step(1000 + 100 * i))
    progress = meter.progress(now_ns=2000 * MS)
    assert progress.steps_total == 11
    assert progress.steps_per_s == pytest.approx(10.0)
    assert progress.phase == "train"


def test_spans_covering_several_steps_count_them_all() -> None:
    meter = StepMeter()
    meter.observe(_step(1000, steps=32))
    meter.observe(_step(2000, steps=32))  # Keras steps_per_execution=32: 32 steps per second
    progress = meter.progress(now_ns=2000 * MS)
    assert progress.steps_total == 64
    assert progress.steps_per_s == pytest.approx(32.0)


def test_old_steps_leave_the_window() -> None:
    meter = StepMeter()
    meter.observe(_step(1000))
    meter.observe(_step(1100))
    later = 1100 * MS + WINDOW_NS + 1
    assert meter.progress(now_ns=later).steps_per_s is None
    assert meter.progress(now_ns=later).steps_total == 2


def test_wait_share_is_wait_time_over_the_time_steps_and_waits_cover() -> None:
    meter = StepMeter()
    for i in range(4):  # each 100 ms: 25 ms waiting for the batch, then a 75 ms step
        meter.observe(_wait(1000 + 100 * i + 25, duration_ms=25))
        meter.observe(_step(1000 + 100 * i + 100, duration_ms=75))
    assert meter.progress(now_ns=1400 * MS).wait_share == pytest.approx(0.25)


def test_ranks_are_not_added_and_the_slowest_input_sets_the_wait() -> None:
    meter = StepMeter()
    for pid, wait_ms in ((1, 50), (2, 10)):
        for i in range(4):
            start = 1000 + 100 * i
            meter.observe(Span("train", SpanKind.WAIT, start * MS, (start + wait_ms) * MS, pid=pid))
            meter.observe(
                Span("train", SpanKind.STEP, (start + wait_ms) * MS, (start + 100) * MS, pid=pid)
            )
    progress = meter.progress(now_ns=1400 * MS)
    # Ranks in lockstep wait as long as the slowest rank's input (as the report counts it).
    assert progress.wait_share == pytest.approx(0.50)
    assert progress.steps_per_s == pytest.approx(10.0)  # not 20: the ranks step together
    assert progress.steps_total == 8


def test_each_rank_live_with_its_identity_and_gpu() -> None:
    meter = StepMeter()
    meter.observe(Event(0, PROCESS_EVENT, "", {"pid": 1, "ppid": 0, "launcher": "torchrun",
                                               "rank": 3, "world_size": 4}))  # fmt: skip
    meter.observe(Event(0, PROCESS_EVENT, "", {"pid": 7, "ppid": 1}))  # its loader worker
    meter.observe(Event(0, GPU_PROCESS_EVENT, "", {"pid": 1, "device": 2, "uuid": "GPU-x"}))
    for pid, wait_ms in ((1, 50), (7, 10)):
        for i in range(4):
            start = 1000 + 100 * i
            meter.observe(Span("train", SpanKind.WAIT, start * MS, (start + wait_ms) * MS, pid=pid))
            meter.observe(
                Span("train", SpanKind.STEP, (start + wait_ms) * MS, (start + 100) * MS, pid=pid)
            )
    rank, worker = sorted(meter.processes(now_ns=1400 * MS), key=lambda p: p.pid or 0)
    assert rank.identity is not None and rank.identity.rank == 3
    assert (rank.steps_total, rank.device, rank.uuid, rank.phase) == (4, 2, "GPU-x", "train")
    assert rank.step_s == pytest.approx(0.1) and rank.wait_share == pytest.approx(0.5)
    assert worker.identity == rank.identity and worker.device is None  # its parent's rank


def test_leading_warm_up_steps_are_left_out_of_the_share_and_rate() -> None:
    meter = StepMeter(clock=lambda: 0)
    meter.observe(_step(1000, duration_ms=1000))  # the first step: tracing, nothing waited
    for index in range(1, 21):
        meter.observe(_wait(1000 + 10 * index - 5, 5))
        meter.observe(_step(1000 + 10 * index, duration_ms=10))
    progress = meter.progress(now_ns=1200 * MS)
    assert progress.wait_share == pytest.approx(0.5)
    assert progress.steps_per_s == pytest.approx(100.0)


def test_only_the_phase_the_process_is_in_counts() -> None:
    meter = StepMeter(clock=lambda: 0)
    for index in range(1, 11):  # training that waits half of each step
        meter.observe(_wait(10 * index - 5, 5))
        meter.observe(_step(10 * index, duration_ms=10))
    for index in range(11, 21):  # then a validation that waits nothing
        meter.observe(Span("validation", SpanKind.WAIT, 10 * index * MS, 10 * index * MS))
        meter.observe(Span("validation", SpanKind.STEP, (10 * index - 10) * MS, 10 * index * MS))
    progress = meter.progress(now_ns=200 * MS)
    assert progress.phase == "validation" and progress.wait_share == pytest.approx(0.0)
