"""Host-to-device copies from pageable memory: timed by the `.to()`/`.cuda()` wrappers, summed per
step, sent as one "pageable_copy" event per phase.

On this CPU build the `meta` device stands in for a GPU: a `.to("meta")` of a CPU tensor leaves
the CPU from memory that is not pinned, as a pageable copy to CUDA does, through the same
wrapper. Real copies, pinned ones left alone, need a GPU (`gpu` marker).
"""

from __future__ import annotations

from typing import Any

import pytest
from hookspans import Collected, FakeClock

from gpuwhy.hooks import api, attribution, auto, tracker
from gpuwhy.model import SpanKind
from gpuwhy.wire import COPY_EVENT


def copy_events(collected: Collected) -> dict[str, tuple[int, int, int]]:
    """phase -> (copies, ns, bytes), summed over the events delivered."""
    sums: dict[str, tuple[int, int, int]] = {}
    for event in collected.events(COPY_EVENT):
        count, ns, size = sums.get(event.data["phase"], (0, 0, 0))
        sums[event.data["phase"]] = (
            count + event.data["count"],
            ns + event.data["ns"],
            size + event.data["bytes"],
        )
    return sums


def test_copies_are_summed_per_step_and_sent_as_one_event_per_phase(
    collected: Collected, clock: FakeClock
) -> None:
    with api.phase("train"):
        for copies in (2, 0, 1):
            with api.step():
                for _ in range(copies):
                    start = clock()
                    clock.advance_ms(3)
                    tracker.pageable_copy(start, clock(), 1000)
        start = clock()
        clock.advance_ms(1)
        tracker.pageable_copy(start, clock(), 10)  # between steps: the phase's
    tracker.pageable_copy(0, 1, 10)  # outside every phase: attributable to none, dropped
    assert copy_events(collected) == {"train": (4, 10_000_000, 3010)}
    assert len(collected.events(COPY_EVENT)) == 1


def test_an_unnamed_loops_copies_wait_for_its_name(collected: Collected, clock: FakeClock) -> None:
    """A plain loop's steps are held until it is seen to train (or not): its copies too, then
    sent under the name it got."""
    for _ in range(3):
        api.step()
        clock.advance_ms(4)
        tracker.pageable_copy(clock() - 2_000_000, clock(), 64)
    tracker.trained()
    api.step()
    tracker.finalize(clock())
    assert copy_events(collected) == {"train": (3, 6_000_000, 192)}


def test_the_step_open_at_exit_is_dropped_but_its_copies_stay_in_its_phase(
    collected: Collected, clock: FakeClock
) -> None:
    with api.phase("train"):
        for _ in range(2):
            api.step()
            clock.advance_ms(5)
            tracker.pageable_copy(clock() - 2_000_000, clock(), 100)
        tracker.finalize(clock())  # the second step's end was never seen
    assert copy_events(collected) == {"train": (2, 4_000_000, 200)}
    assert len(collected.spans(SpanKind.STEP, "train")) == 1


def test_an_unnamed_loop_that_never_trains_is_named_once_its_held_copies_fill(
    collected: Collected, clock: FakeClock
) -> None:
    """Copies count toward the records an unnamed loop holds: each step here holds two."""
    steps = tracker.HELD_RECORDS // 2
    for _ in range(steps + 1):
        api.step()
        clock.advance_ms(1)
        tracker.pageable_copy(clock() - 500_000, clock(), 8)
    assert copy_events(collected) == {"train": (steps, steps * 500_000, steps * 8)}
    tracker.finalize(clock())


def test_the_attributor_sums_copies_with_the_syncs_interval() -> None:
    attributor = attribution.Attributor(sync_interval_ns=10_000)
    copy = (attribution.COPY, "train", 2, 500, 4096, 50)
    assert attributor.feed([copy], [], now_ns=100, pid=7) == []
    [event] = attributor.feed([copy], [], now_ns=10_100, pid=7)
    assert event.kind == COPY_EVENT
    assert event.data == {"phase": "train", "count": 4, "ns": 1000, "bytes": 8192, "pid": 7}
    attributor.feed([copy], [], now_ns=10_200, pid=7)
    assert [e.data["count"] for e in attributor.finish(7) if e.kind == COPY_EVENT] == [2]


def _torch() -> Any:
    return pytest.importorskip("torch")


def _start_a_device(torch: Any) -> None:
    """What torch runs as a device starts in the process: the calls queued for then."""
    for call, _ in torch.cuda._queued_calls:
        call()


@pytest.mark.slow
def test_a_copy_off_the_cpu_from_memory_not_pinned_is_timed(collected: Collected) -> None:
    torch = _torch()
    auto.install({})
    try:
        _start_a_device(torch)
        batch = torch.randn(64, 32)
        with api.phase("train"):
            for _ in range(3):
                with api.step():
                    moved = batch.to("meta")  # off the CPU: timed
                    assert moved.device.type == "meta" and moved.shape == batch.shape
                    assert batch.to(torch.float64).dtype == torch.float64  # stays: not timed
                    assert batch.to("cpu") is batch  # no copy at all
                    with pytest.raises(RuntimeError):  # errors pass through unchanged
                        batch.to("no-such-device")
    finally:
        auto.uninstall()
    [(count, ns, size)] = copy_events(collected).values()
    assert (count, size) == (3, 3 * 64 * 32 * 4) and ns > 0
    assert list(copy_events(collected)) == ["train"]


@pytest.mark.gpu
@pytest.mark.slow
def test_pageable_copies_to_the_gpu_are_timed_and_pinned_ones_not(hooks: Collected) -> None:
    torch = _torch()
    if not torch.cuda.is_available():
        pytest.skip("this torch build sees no CUDA device")
    pageable = torch.randn(1024, 1024)  # 4 MiB
    pinned = pageable.pin_memory()
    with api.phase("train"):
        for _ in range(4):
            with api.step():
                pageable.to("cuda")
                pageable.cuda()
                pinned.to("cuda", non_blocking=True)
                pinned.cuda(non_blocking=True)
        torch.cuda.synchronize()
    [(count, ns, size)] = copy_events(hooks).values()
    assert (count, size) == (8, 8 * 4 * 2**20) and ns > 0
