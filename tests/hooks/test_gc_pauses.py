"""Full garbage collections timed from `gc.callbacks` (hooks/gc_pauses.py), in this process."""

from __future__ import annotations

import gc
import os
import time

from hookspans import Collected

from gpuwhy.hooks import gc_pauses
from gpuwhy.wire import GC_EVENT


def test_a_full_collection_is_one_event_with_its_time_and_the_young_ones_none(
    hooks: Collected,
) -> None:
    live = [[i] for i in range(200_000)]  # something to traverse (may set off collections)
    young = time.monotonic_ns()
    gc.collect(0)
    gc.collect(1)
    before = time.monotonic_ns()
    gc.collect()
    after = time.monotonic_ns()
    events = [e for e in hooks.events(GC_EVENT) if e.t_ns >= young]
    [event] = events
    assert before <= event.t_ns <= event.t_ns + event.data["duration_ns"] <= after
    assert event.data["duration_ns"] > 0
    assert event.data["pid"] == os.getpid()
    assert isinstance(event.data["collected"], int)
    assert len(live) == 200_000


def test_uninstalled_it_leaves_gc_callbacks_as_it_found_them(hooks: Collected) -> None:
    assert gc.callbacks.count(gc_pauses._on_collection) == 1
    gc_pauses.install()  # idempotent
    assert gc.callbacks.count(gc_pauses._on_collection) == 1
    gc_pauses.uninstall()
    assert gc_pauses._on_collection not in gc.callbacks
    gc.collect()
    assert hooks.events(GC_EVENT) == []


def test_a_stop_without_its_start_emits_nothing(hooks: Collected) -> None:
    # Installed while a collection ran (from another collection's callback): no start seen.
    gc_pauses._on_collection("stop", {"generation": 2, "collected": 0})
    gc_pauses._on_collection("start", {})  # malformed info: ignored, never raised
    assert hooks.events(GC_EVENT) == []
