"""The attributor's rules on timelines written by hand.

CONSTRUCTED DATA: every timeline below is made up to exercise one rule (times in ms, turned into
ns); the same rules are validated against real training in test_wait_accuracy.py.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path
from types import FrameType

from gpuwhy.hooks import attribution
from gpuwhy.hooks.attribution import (
    BUSY_AT_DELIVERY,
    BUSY_AT_REQUEST,
    CHECKED,
    COMPUTE_END,
    DONE,
    END_PULL,
    EXPECT_DONE,
    LAST,
    OVERLAP,
    PHASE,
    PULL,
    READY_AT_REQUEST,
    SRC_GRAPH,
    SRC_HOST,
    STEP,
    Attributor,
    held_bits,
)
from gpuwhy.model import Event, Span, SpanKind
from gpuwhy.wire import decode, span_line

MS = 1_000_000
PID = 7


def ms(value: float) -> int:
    return int(value * MS)


def step(
    index: int, start: float, end: float, exec_id: int, prev: int | None, mode: int, hint: int = 1
) -> tuple[object, ...]:
    return (STEP, "train", index, ms(start), ms(end), hint, exec_id, prev, mode)


def waits(records: list[Span | Event]) -> list[tuple[float, float, int | None, int]]:
    return [
        ((s.start_ns) / MS, (s.end_ns) / MS, s.step, s.steps)
        for s in records
        if isinstance(s, Span) and s.kind is SpanKind.WAIT
    ]


def steps_of(records: list[Span | Event]) -> list[tuple[float, float, int | None, int]]:
    return [
        (s.start_ns / MS, s.end_ns / MS, s.step, s.steps)
        for s in records
        if isinstance(s, Span) and s.kind is SpanKind.STEP
    ]


def test_phase_records_become_phase_spans_at_once() -> None:
    out = Attributor().feed([(PHASE, "train", ms(0), ms(10))], [], ms(10), PID)
    assert out == [Span("train", SpanKind.PHASE, ms(0), ms(10), pid=PID)]


def test_records_already_spans_or_events_pass_through_a_span_given_the_process() -> None:
    span = Span("eval", SpanKind.STEP, 1, 2)
    event = Event(3, "hook", "x")
    assert Attributor().feed([span, event], [], 0, PID) == [
        Span("eval", SpanKind.STEP, 1, 2, pid=PID),
        event,
    ]
    other = Span("eval", SpanKind.STEP, 1, 2, pid=PID + 1)
    assert Attributor().feed([other], [], 0, PID) == [other]


def test_a_host_pull_is_the_wait_of_its_step() -> None:
    # Plain loop: pull 0-4 ms, compute to 10 ms. No completion stamps expected.
    items = [(PULL, 1, ms(0), ms(4), 0), step(0, 0, 10, 1, None, SRC_HOST)]
    out = Attributor().feed(items, [], ms(10), PID)
    assert steps_of(out) == [(0, 10, 0, 1)]
    assert waits(out) == [(0, 4, 0, 1)]


def test_a_pull_of_a_batch_already_made_is_a_hand_over_not_a_wait() -> None:
    # A DataLoader's workers had the batch queued at the request: the 3 ms of the pull hand it
    # over (the input made free pays them too); the next pull found nothing queued and waited.
    items = [
        (PULL, 1, ms(0), ms(3), CHECKED | READY_AT_REQUEST),
        step(0, 0, 10, 1, None, SRC_HOST),
        (PULL, 2, ms(10), ms(18), CHECKED),
        step(1, 10, 20, 2, 1, SRC_HOST),
    ]
    out = Attributor().feed(items, [], ms(20), PID)
    assert waits(out) == [(3, 3, 0, 1), (10, 18, 1, 1)]


def test_a_hand_over_that_waited_on_its_busy_worker_counts_that_wait() -> None:
    # The batch was queued, but its worker, computing the next one, answered 2 ms late: that
    # part of the 3 ms pull is a wait (a cheaper batch gives it back), placed at its end.
    items = [
        (PULL, 1, ms(0), ms(3), CHECKED | READY_AT_REQUEST | held_bits(ms(2))),
        step(0, 0, 10, 1, None, SRC_HOST),
    ]
    out = Attributor().feed(items, [], ms(10), PID)
    assert waits(out) == [(1, 3, 0, 1)]
    assert steps_of(out) == [(0, 10, 0, 1)]  # the step still begins at the request


def test_a_pull_that_found_the_data_ended_is_a_wait_of_no_step() -> None:
    items = [
        (PULL, 1, ms(0), ms(2), 0),
        (PULL, 1, ms(12), ms(40), 0),  # no more data: workers shutting down
        step(0, 0, 40, 1, None, SRC_HOST | LAST | END_PULL),
    ]
    out = Attributor().feed(items, [], ms(40), PID)
    assert steps_of(out) == [(0, 40, 0, 1)]
    assert sorted(waits(out)) == [(0, 2, 0, 1), (12, 40, 0, 0)]


def test_a_step_without_measured_input_has_no_wait_span() -> None:
    out = Attributor().feed([step(3, 0, 10, 1, None, 0)], [], ms(10), PID)
    assert steps_of(out) == [(0, 10, 3, 1)] and waits(out) == []


def test_a_measured_loop_that_got_no_data_made_no_step() -> None:
    # The loop began an execution, asked for a batch and the data had ended.
    out = Attributor().feed([step(5, 0, 1, 1, None, SRC_HOST)], [], ms(1), PID)
    assert out == []


def test_first_pull_waits_only_after_the_previous_execution_finished() -> None:
    # Asynchronous device: step 0 was dispatched at 0 and its results existed at 8 ms; the
    # host asked for batch 1 at 1 ms and got it at 10 ms: the device stood idle 8 -> 10 ms.
    mode = SRC_HOST | EXPECT_DONE
    items = [
        (PULL, 2, ms(1), ms(10), 0),
        step(1, 1, 11, 2, 1, mode),
        (DONE, 1, ms(8)),
        (DONE, 2, ms(15)),
    ]
    out = Attributor().feed(items, [], ms(15), PID)
    assert waits(out) == [(8, 10, 1, 1)]


def test_a_step_waits_for_its_predecessors_completion_stamp_then_resolves() -> None:
    attributor = Attributor(hold_ns=ms(2000))
    mode = SRC_HOST | EXPECT_DONE
    first = attributor.feed(
        [(PULL, 2, ms(1), ms(10), 0), step(1, 1, 11, 2, 1, mode)], [], ms(12), PID
    )
    assert first == []  # held: execution 1's completion has not arrived
    later = attributor.feed([(DONE, 1, ms(3)), (DONE, 2, ms(12))], [], ms(13), PID)
    assert waits(later) == [(3, 10, 1, 1)]


def test_a_held_step_is_resolved_without_the_stamp_after_the_hold() -> None:
    attributor = Attributor(hold_ns=ms(100))
    mode = SRC_HOST | EXPECT_DONE
    assert (
        attributor.feed([(PULL, 2, ms(1), ms(10), 0), step(1, 1, 11, 2, 1, mode)], [], ms(11), PID)
        == []
    )
    out = attributor.feed([], [], ms(200), PID)
    assert waits(out) == [(1, 10, 1, 1)]  # no stamp: the whole pull is taken as waiting


def test_in_graph_pulls_are_matched_to_steps_by_time() -> None:
    # TensorFlow, steps_per_execution=1: each execution pulls one batch inside the function.
    mode = SRC_GRAPH | EXPECT_DONE | OVERLAP
    items = [
        step(0, 0, 10, 1, None, mode),
        (DONE, 1, ms(9)),
        step(1, 10, 20, 2, 1, mode),
        (DONE, 2, ms(19)),
    ]
    graph_pulls = [(ms(-5), ms(-4)), (ms(0.5), ms(3.5)), (ms(10.5), ms(11))]  # -5: a build peek
    out = Attributor().feed(items, graph_pulls, ms(20), PID)
    assert sorted(waits(out)) == [(0.5, 3.5, 0, 1), (10.5, 11, 1, 1)]


def test_pulls_after_the_last_closed_step_wait_for_their_step() -> None:
    attributor = Attributor()
    mode = SRC_GRAPH | EXPECT_DONE | OVERLAP
    out = attributor.feed(
        [step(0, 0, 10, 1, None, mode), (DONE, 1, ms(9))],
        [(ms(1), ms(2)), (ms(11), ms(13))],
        ms(12),
        PID,
    )
    assert waits(out) == [(1, 2, 0, 1)]
    out = attributor.feed([step(1, 10, 20, 2, 1, mode), (DONE, 2, ms(19))], [], ms(21), PID)
    assert waits(out) == [(11, 13, 1, 1)]


def test_overlapped_pulls_count_only_past_the_previous_compute() -> None:
    # steps_per_execution=4, data late: each batch takes 12 ms, each compute 6 ms, and the
    # loop asks for batch k+1 as soon as batch k arrived (it computes k meanwhile).
    # Execution: pulls (0,12) (12,24) (24,36) (36,48); last compute 48..54; returned at 54.
    mode = SRC_GRAPH | EXPECT_DONE | OVERLAP
    pulls = [(ms(0), ms(12)), (ms(12), ms(24)), (ms(24), ms(36)), (ms(36), ms(48))]
    out = Attributor().feed(
        [step(0, 0, 55, 1, None, mode, hint=4), (DONE, 1, ms(54))], pulls, ms(60), PID
    )
    # c = min(54 - 48, (54 - 36) / 2) = 6; waits: 12 + 3 * (12 - 6) = 30 ms, ending at 48.
    assert waits(out) == [(18, 48, 0, 4)]
    assert steps_of(out) == [(0, 55, 0, 4)]


def test_stamped_compute_ends_replace_the_tails_estimate() -> None:
    # The same execution, with each step's compute end stamped in-graph (2 ms after its batch),
    # and a tail of 8 ms after the last compute: work the loop does once, which the tail's
    # estimate would count as every step's compute (c = min(56 - 48, 20 / 2) = 8: 12 + 3 * 4).
    mode = SRC_GRAPH | EXPECT_DONE | OVERLAP
    pulls = [(ms(0), ms(12)), (ms(12), ms(24)), (ms(24), ms(36)), (ms(36), ms(48))]
    ends = [(ms(t), COMPUTE_END) for t in (14, 26, 38, 50)]
    out = Attributor().feed(
        [step(0, 0, 57, 1, None, mode, hint=4), (DONE, 1, ms(58))], pulls + ends, ms(60), PID
    )
    # From each compute's end to the next batch: 12 + 3 * (12 - 2) = 42 ms, ending at 48.
    assert waits(out) == [(6, 48, 0, 4)]
    # A compute still running when the next batch arrived: that pull waited nothing.
    late = [(ms(t), COMPUTE_END) for t in (25, 26, 38, 50)]
    out = Attributor().feed(
        [step(0, 0, 57, 1, None, mode, hint=4), (DONE, 1, ms(58))], pulls + late, ms(60), PID
    )
    assert waits(out) == [(16, 48, 0, 4)]  # 12 + 0 + 10 + 10


def test_overlapped_pulls_of_a_fast_pipeline_wait_nothing() -> None:
    # Data early: every pull returns in 0.1 ms; computes of 6 ms run back to back from 0.1 ms
    # and the loop asks for batch k+1 when compute k starts (0.1, 6.1, 12.1).
    mode = SRC_GRAPH | EXPECT_DONE | OVERLAP
    pulls = [(ms(t), ms(t + 0.1)) for t in (0, 0.1, 6.1, 12.1)]
    out = Attributor().feed(
        [step(0, 0, 25, 1, None, mode, hint=4), (DONE, 1, ms(24.1))], pulls, ms(30), PID
    )
    # c = min(24.1 - 12.2, (24.1 - 12.1) / 2) = 6: only the first pull's 0.1 ms waited.
    assert [(round(a, 3), round(b, 3), i, n) for a, b, i, n in waits(out)] == [(12.1, 12.2, 0, 4)]


def test_pulls_made_before_the_compiled_call_all_wait() -> None:
    # TensorFlow predict: the batches are fetched in Python, then the function runs.
    mode = SRC_GRAPH | EXPECT_DONE
    pulls = [(ms(0), ms(5)), (ms(5), ms(10))]
    out = Attributor().feed(
        [step(0, 0, 20, 1, None, mode, hint=2), (DONE, 1, ms(19))], pulls, ms(20), PID
    )
    assert waits(out) == [(0, 10, 0, 2)]


def test_the_partial_last_execution_reports_the_steps_it_ran() -> None:
    # steps_per_execution=4 over 10 batches: the last execution runs 2 (Keras says 4).
    mode = SRC_GRAPH | EXPECT_DONE | OVERLAP
    pulls = [(ms(0), ms(1)), (ms(4), ms(5))]
    out = Attributor().feed(
        [step(8, 0, 9, 1, None, mode | LAST, hint=4), (DONE, 1, ms(8))], pulls, ms(10), PID
    )
    assert steps_of(out) == [(0, 8, 8, 2)]  # ended with its results, not at epoch-end work


def test_done_keeps_the_earliest_stamp() -> None:
    mode = SRC_HOST | EXPECT_DONE
    items = [
        (PULL, 2, ms(10), ms(14), 0),
        step(1, 10, 20, 2, 1, mode),
        (DONE, 1, ms(12)),
        (DONE, 1, ms(9)),
    ]  # function return, then batch-end hook
    assert waits(Attributor().feed(items, [], ms(30), PID)) == [(10, 14, 1, 1)]


def test_unknown_compute_time_gives_no_wait_and_one_event() -> None:
    attributor = Attributor(hold_ns=0)
    mode = SRC_GRAPH | EXPECT_DONE | OVERLAP
    pulls = [(ms(0), ms(3)), (ms(3), ms(6))]
    out = attributor.feed([step(0, 0, 10, 1, None, mode, hint=2)], pulls, ms(10), PID)
    assert waits(out) == []
    assert [e.kind for e in out if isinstance(e, Event)] == ["data_wait_unavailable"]


def test_finish_releases_held_steps() -> None:
    attributor = Attributor()
    mode = SRC_HOST | EXPECT_DONE
    assert (
        attributor.feed([(PULL, 2, ms(1), ms(3), 0), step(1, 1, 5, 2, 1, mode)], [], ms(5), PID)
        == []
    )
    assert waits(attributor.finish(PID)) == [(1, 3, 1, 1)]


def test_readiness_checks_decide_the_first_pull() -> None:
    # Asynchronous device with a readiness check around each pull (JAX is_ready, CUDA event).
    mode = SRC_HOST | EXPECT_DONE
    late_stamp = (DONE, 1, ms(30))  # the completion stamp came late (a busy callback thread)
    idle = Attributor().feed(
        [
            (PULL, 2, ms(1), ms(10), CHECKED),
            step(1, 1, 11, 2, 1, mode),
            late_stamp,
            (DONE, 2, ms(40)),
        ],
        [],
        ms(40),
        PID,
    )
    assert waits(idle) == [(1, 10, 1, 1)]  # idle when asked: the whole pull waited
    hidden = Attributor().feed(
        [
            (PULL, 2, ms(1), ms(10), CHECKED | BUSY_AT_REQUEST | BUSY_AT_DELIVERY),
            step(1, 1, 11, 2, 1, mode),
            (DONE, 1, ms(12)),
            (DONE, 2, ms(40)),
        ],
        [],
        ms(40),
        PID,
    )
    assert waits(hidden) == [(10, 10, 1, 1)]  # busy throughout: nothing waited
    finished = Attributor().feed(
        [
            (PULL, 2, ms(1), ms(10), CHECKED | BUSY_AT_REQUEST),
            step(1, 1, 11, 2, 1, mode),
            (DONE, 1, ms(4)),
            (DONE, 2, ms(40)),
        ],
        [],
        ms(40),
        PID,
    )
    assert waits(finished) == [(4, 10, 1, 1)]  # finished during the pull, at its stamp


def test_delivering_a_step_calls_five_of_gpuwhys_functions() -> None:
    """The flusher attributes every step while the job trains, and holds the interpreter as it
    does: a step of a framework loop that reports completion (a pull, the step, its DONE) costs
    its readiness test, its resolution, its wait and the two lines of its spans, and no object
    of gpuwhy's is made for it."""
    mode = SRC_HOST | OVERLAP | EXPECT_DONE
    records: list[tuple[object, ...]] = []
    for i in range(1, 401):
        records += [
            (PULL, i, ms(i), ms(i + 0.1), CHECKED),
            step(i, i, i + 1, i, i - 1 if i > 1 else None, mode),
            (DONE, i, ms(i + 0.9)),
        ]
    package = str(Path(attribution.__file__).resolve().parents[1])
    calls: collections.Counter[str] = collections.Counter()

    def count(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(package):
            calls[frame.f_code.co_qualname] += 1

    attributor = Attributor(span=span_line)
    lines = []
    sys.setprofile(count)
    try:
        for first in range(0, len(records), 300):  # a delivery every 100 steps
            lines += attributor.feed(records[first : first + 300], [], ms(500), PID)
    finally:
        sys.setprofile(None)
    assert len(lines) == 2 * 400  # each step and its wait
    assert all(decode(line).pid == PID for line in lines)
    per_step = sum(calls.values()) / 400
    assert per_step <= 5.05, dict(calls)  # (a delivery's own call, once a hundred steps)


def test_completion_stamps_older_than_ten_seconds_are_forgotten_from_the_oldest() -> None:
    """A long job's stamps do not pile up: past 4,096 kept, those over 10 s old go (swept from
    the oldest, up to the first fresh one)."""
    attributor = Attributor()
    old = [(DONE, i, ms(i)) for i in range(5000)]  # 0-5 s
    fresh = [(DONE, 10_000 + i, ms(12_000 + i)) for i in range(100)]  # 12-12.1 s
    attributor.feed([*old, *fresh], [], ms(12_100), PID)
    assert attributor._done.keys() == {done[1] for done in old if done[2] >= ms(2_100)} | {
        done[1] for done in fresh
    }
    attributor.feed([], [], ms(30_000), PID)  # 3,000 kept: under the bound, none swept
    assert len(attributor._done) == 2_900 + 100
