"""gpuwhy.phase / step / wait / iterate, with a clock the test moves by hand."""

from __future__ import annotations

import itertools
import os
import threading
from typing import Any

import pytest
from hookspans import Collected, FakeClock, durations_ms, end_of_data_waits, step_waits

import gpuwhy
from gpuwhy.hooks import api, iterators, tracker
from gpuwhy.model import SpanKind


def test_phases_nest_without_overlap(collected: Collected, clock: FakeClock) -> None:
    with gpuwhy.phase("train"):
        clock.advance_ms(10)
        with gpuwhy.phase("validation"):
            clock.advance_ms(3)
        clock.advance_ms(5)
    phases = collected.spans(SpanKind.PHASE)
    assert [(p.phase, round((p.end_ns - p.start_ns) / 1e6)) for p in phases] == [
        ("train", 10),
        ("validation", 3),
        ("train", 5),
    ]
    for earlier, later in itertools.pairwise(phases):
        assert earlier.end_ns <= later.start_ns


def test_phase_is_also_a_decorator(collected: Collected, clock: FakeClock) -> None:
    @gpuwhy.phase("evaluate")
    def evaluate() -> int:
        clock.advance_ms(4)
        return 3

    assert evaluate() == 3
    assert durations_ms(collected.spans(SpanKind.PHASE, "evaluate")) == [4]


def test_plain_step_calls_close_the_previous_step(collected: Collected, clock: FakeClock) -> None:
    with gpuwhy.phase("train"):
        for ms in (5, 7, 9):
            gpuwhy.step()
            clock.advance_ms(ms)
    steps = collected.spans(SpanKind.STEP, "train")
    assert [(s.step, s.steps) for s in steps] == [(0, 1), (1, 1), (2, 1)]
    assert durations_ms(steps) == [5, 7, 9]  # the last ends with its phase


def test_with_step_spans_exactly_its_block(collected: Collected, clock: FakeClock) -> None:
    with gpuwhy.phase("train"):
        for _ in range(2):
            clock.advance_ms(1)  # loop overhead outside the steps
            with gpuwhy.step():
                clock.advance_ms(4)
    assert durations_ms(collected.spans(SpanKind.STEP, "train")) == [4, 4]


def test_step_indices_continue_across_segments_of_a_phase(
    collected: Collected, clock: FakeClock
) -> None:
    for _ in range(2):
        with gpuwhy.phase("finetune"):
            for _ in range(3):
                with gpuwhy.step():
                    clock.advance_ms(1)
    indices = [s.step for s in collected.spans(SpanKind.STEP, "finetune")]
    assert indices == sorted(set(indices)) and len(indices) == 6


def test_a_step_without_a_phase_is_in_an_implicit_train_phase(
    collected: Collected, clock: FakeClock
) -> None:
    for _ in range(3):
        with gpuwhy.step():
            clock.advance_ms(2)
        clock.advance_ms(1)
    tracker.finalize(clock())  # what interpreter exit does
    assert durations_ms(collected.spans(SpanKind.STEP, "train")) == [2, 2, 2]
    assert durations_ms(collected.spans(SpanKind.PHASE, "train")) == [8]  # to the last step


def test_wait_marks_input_wait_of_the_open_step(collected: Collected, clock: FakeClock) -> None:
    with gpuwhy.phase("train"):
        for _ in range(2):
            gpuwhy.step()
            with gpuwhy.wait():
                clock.advance_ms(3)
            clock.advance_ms(5)
    waits = collected.spans(SpanKind.WAIT, "train")
    steps = collected.spans(SpanKind.STEP, "train")
    assert durations_ms(waits) == [3, 3] and durations_ms(steps) == [8, 8]
    assert [w.step for w in waits] == [s.step for s in steps]


def test_wait_before_the_step_belongs_to_that_step(collected: Collected, clock: FakeClock) -> None:
    with gpuwhy.phase("train"):
        for _ in range(2):
            with gpuwhy.wait():
                clock.advance_ms(2)
            with gpuwhy.step():
                clock.advance_ms(6)
    steps = collected.spans(SpanKind.STEP, "train")
    waits = collected.spans(SpanKind.WAIT, "train")
    assert durations_ms(steps) == [8, 8]  # a step covers its own input wait
    assert [w.step for w in waits] == [s.step for s in steps]


def test_iterate_times_each_pull_and_defines_steps(collected: Collected, clock: FakeClock) -> None:
    def batches():  # type: ignore[no-untyped-def]
        for value in range(3):
            clock.advance_ms(4)  # producing a batch
            yield value

    with gpuwhy.phase("train"):
        seen = []
        for batch in gpuwhy.iterate(batches()):
            seen.append(batch)
            clock.advance_ms(10)  # training on it
    assert seen == [0, 1, 2]
    assert durations_ms(collected.spans(SpanKind.WAIT, "train")) == [4, 4, 4]
    assert durations_ms(collected.spans(SpanKind.STEP, "train")) == [14, 14, 14]


def test_iterate_left_early_ends_its_last_step_there(
    collected: Collected, clock: FakeClock
) -> None:
    with gpuwhy.phase("train"):
        for batch in gpuwhy.iterate(range(10)):
            clock.advance_ms(3)
            if batch == 1:
                break
        clock.advance_ms(50)  # after the loop: not a step
    assert durations_ms(collected.spans(SpanKind.STEP, "train")) == [3, 3]


def test_nothing_is_kept_without_a_sink(clock: FakeClock) -> None:
    from gpuwhy.hooks import emitter

    emitter.configure(None)
    before = emitter.stats()["emitted"]
    with gpuwhy.phase("train"):
        gpuwhy.step()
    emitter.flush()
    assert emitter.stats()["emitted"] == before and emitter.stats()["pending"] == 0


def test_public_names_are_exported_lazily() -> None:
    assert gpuwhy.phase is api.phase and gpuwhy.step is api.step and gpuwhy.wait is api.wait


class _Made:
    """An iterator that says when it was made, as the framework hooks note it."""

    def __init__(self, clock: FakeClock, items: int, make_ms: float, item_ms: float) -> None:
        made = clock.now
        clock.advance_ms(make_ms)  # building the pipeline, starting workers
        setattr(self, tracker.CREATED_ATTR, made)
        self.clock, self.left, self.item_ms = clock, items, item_ms

    def __iter__(self) -> _Made:
        return self

    def __next__(self) -> int:
        self.clock.advance_ms(self.item_ms)
        if not self.left:
            raise StopIteration
        self.left -= 1
        return self.left


def _loop(made: _Made, clock: FakeClock) -> None:
    while True:
        try:
            iterators.timed_next(_Made.__next__, made)
        except StopIteration:
            return
        clock.advance_ms(10)  # the step's compute


def test_a_plain_loop_begins_when_its_iterator_was_made_and_ends_with_its_data(
    collected: Collected, clock: FakeClock
) -> None:
    start = clock.now
    _loop(_Made(clock, items=3, make_ms=50, item_ms=2), clock)
    (phase,) = collected.spans(SpanKind.PHASE, "train")
    assert phase.start_ns == start and phase.end_ns == clock.now  # the loop's whole time
    waits = collected.spans(SpanKind.WAIT, "train")
    assert durations_ms(step_waits(waits)) == [52, 2, 2]  # making it was the first wait
    assert durations_ms(end_of_data_waits(waits)) == [2]  # so was finding no more data
    assert durations_ms(collected.spans(SpanKind.STEP, "train")) == [62, 12, 14]


def test_an_iterator_made_before_the_last_loop_ended_starts_at_its_first_pull(
    collected: Collected, clock: FakeClock
) -> None:
    early = _Made(clock, items=2, make_ms=0, item_ms=1)  # made long before its loop
    _loop(_Made(clock, items=2, make_ms=5, item_ms=1), clock)
    clock.advance_ms(100)  # between the loops: logging, saving
    second_start = clock.now
    _loop(early, clock)
    phases = collected.spans(SpanKind.PHASE, "train")
    assert len(phases) == 2 and phases[1].start_ns == second_start


class _Pipeline:
    """An iterator's state whose destruction takes time (tf.data stopping its threads)."""

    def __init__(self, clock: FakeClock, ms: float) -> None:
        self.clock, self.ms = clock, ms

    def __del__(self) -> None:
        self.clock.advance_ms(self.ms)


class _Released(_Made):
    def __init__(self, clock: FakeClock, destroy_ms: float) -> None:
        super().__init__(clock, items=2, make_ms=0, item_ms=1)
        self.pipeline = _Pipeline(clock, destroy_ms)


@pytest.fixture
def released(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracker, "released_by_loop", {_Released})


def test_a_loop_ends_when_its_iterator_let_go_of_at_once_is_destroyed(
    collected: Collected, clock: FakeClock, released: None
) -> None:
    start = clock.now
    _loop(_Released(clock, destroy_ms=75), clock)  # the only reference goes with the call
    (phase,) = collected.spans(SpanKind.PHASE, "train")
    assert (phase.start_ns, phase.end_ns) == (start, clock.now)
    waits = collected.spans(SpanKind.WAIT, "train")
    assert durations_ms(end_of_data_waits(waits)) == [76]  # finding the end, then destroying


def test_an_iterator_the_code_after_the_loop_holds_is_not_the_loop_s(
    collected: Collected, clock: FakeClock, released: None
) -> None:
    held = _Released(clock, destroy_ms=75)
    _loop(held, clock)
    last_pull = clock.now
    clock.advance_ms(6)  # more than a loop's letting go: the code after it
    del held
    gpuwhy.step()  # a later hook call: the loop was settled already, at its last pull
    phases = collected.spans(SpanKind.PHASE, "train")
    assert phases[0].end_ns == last_pull


def test_a_loop_whose_iterator_outlives_it_ends_at_its_last_pull(
    collected: Collected, clock: FakeClock, released: None
) -> None:
    kept = _Released(clock, destroy_ms=75)
    _loop(kept, clock)
    last_pull = clock.now
    other = _Made(clock, items=1, make_ms=0, item_ms=1)
    clock.advance_ms(30)
    _loop(other, clock)  # the next loop, while the first's iterator lives on
    phases = collected.spans(SpanKind.PHASE, "train")
    assert phases[0].end_ns == last_pull and len(phases) == 2
    assert kept.left == 0


def test_a_thread_s_loop_whose_iterator_lives_on_is_ended_at_exit(
    collected: Collected, clock: FakeClock, released: None
) -> None:
    kept: list[_Released] = []

    def work() -> None:
        kept.append(_Released(clock, destroy_ms=75))
        _loop(kept[0], clock)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    last_pull = clock.now
    assert collected.spans(SpanKind.PHASE, "train") == []  # waiting for the iterator
    tracker.finalize(clock.now + 1_000_000)
    (phase,) = collected.spans(SpanKind.PHASE, "train")
    assert phase.end_ns == last_pull


def test_a_pull_that_waits_only_in_its_first_part_records_that_part(
    collected: Collected, clock: FakeClock
) -> None:
    """A multi-worker pull (tf.distribute): its own worker's pull (3 ms), then the agreement with
    the other workers (6 ms), which is no wait for input; the step still begins at the pull."""
    made = _Made(clock, items=2, make_ms=0, item_ms=3)

    def own_part(call: Any) -> tuple[Any, int]:
        before = clock.now
        item = call()
        waited = clock.now - before
        clock.advance_ms(6)  # the agreement
        return item, waited

    with pytest.raises(StopIteration):
        while True:
            iterators.timed_next(_Made.__next__, made, waited=own_part)
            clock.advance_ms(10)
    waits = collected.spans(SpanKind.WAIT, "train")
    assert durations_ms(step_waits(waits)) == [3, 3]
    steps = collected.spans(SpanKind.STEP, "train")
    assert durations_ms(steps) == [19, 22]  # own pull, agreement, compute; the last: + no data


def test_each_thread_has_its_own_steps_and_a_forked_child_starts_clean(
    collected: Collected, clock: FakeClock
) -> None:
    """The main thread's state is held apart for speed: another thread's steps must not land
    in it, and a child forked mid-phase, whose only thread is the one that forked, starts with
    no phase, no step and nothing to send of its parent's."""
    with gpuwhy.phase("outer"):
        gpuwhy.step()
        seen: list[Any] = []
        worker = threading.Thread(target=lambda: seen.append(tracker.state()))
        worker.start()
        worker.join()
        assert seen[0] is not tracker.state() and seen[0].phases == []
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - the child reports through the pipe
            st = tracker.state()
            os.write(write, b"clean" if not st.phases and st.step is None else b"dirty")
            os._exit(0)
        os.close(write)
        assert os.read(read, 16) == b"clean"
        os.close(read)
        os.waitpid(child, 0)
        clock.advance_ms(5)
    assert len(collected.spans(SpanKind.STEP, "outer")) == 1
