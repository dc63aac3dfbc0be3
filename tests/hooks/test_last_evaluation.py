"""The last evaluation of a loop only optimizer steps bound, which the job's exit ends rather than
`.train()`: where it ended, through the tracker's own calls (what the `Module.train` wrapper and
the forward hook on the trained model make, framework_hooks.py). tests/hooks/
test_validation_by_mode.py runs the same on a real torch job."""

from __future__ import annotations

from hookspans import Collected, FakeClock

from gpuwhy.hooks import tracker
from gpuwhy.model import SpanKind


def _train_then_evaluate(clock: FakeClock, forwards: int) -> int:
    """Ten optimizer steps of 10 ms, then `.eval()` and `forwards` forwards of 20 ms; returns
    when `.eval()` was called."""
    for _ in range(10):
        clock.advance_ms(10)
        tracker.optimizer_step(clock())
    evaluated_from = clock()
    tracker.model_mode(False, evaluated_from)
    for _ in range(forwards):
        clock.advance_ms(20)
        tracker.evaluated(clock())
    return evaluated_from


def _validation(collected: Collected) -> list[tuple[int, int]]:
    return [(s.start_ns, s.end_ns) for s in collected.spans(SpanKind.PHASE, "validation")]


def test_it_ends_with_its_last_forward_on_the_cpu(collected: Collected, clock: FakeClock) -> None:
    began = _train_then_evaluate(clock, forwards=5)
    last_forward = clock()
    clock.advance_ms(500)  # the job saves, prints, tears down: no evaluation
    tracker.finalize(clock())
    assert _validation(collected) == [(began, last_forward)]
    assert len(collected.spans(SpanKind.STEP, "train")) == 9  # the 10th's tail: the evaluation


def test_on_a_device_it_ends_at_the_first_sync_after_its_last_forward(
    collected: Collected, clock: FakeClock
) -> None:
    """A forward on a device only queues its work: the host's next read of a result waits for
    it, and there it ended; later reads are the job's own."""
    began = _train_then_evaluate(clock, forwards=4)
    clock.advance_ms(15)
    tracker.count_sync()  # `.item()` of the last batch's metric: waited for the forward
    synced = clock()
    clock.advance_ms(300)
    tracker.count_sync()  # a print at the end of the job
    tracker.finalize(clock())
    assert _validation(collected) == [(began, synced)]


def test_eval_mode_with_no_forward_names_no_validation(
    collected: Collected, clock: FakeClock
) -> None:
    """`.eval()` before saving the model, with nothing evaluated: no phase."""
    _train_then_evaluate(clock, forwards=0)
    clock.advance_ms(100)
    tracker.count_sync()
    tracker.finalize(clock())
    assert _validation(collected) == []
