"""Fixtures for the hooks: a recording sink, an injectable clock, clean patches after each test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hookspans import Collected, FakeClock

from gpuwhy.hooks import auto, emitter, tracker

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


@pytest.fixture
def collected() -> Iterator[Collected]:
    """The emitter delivers into a list for the test; restored to nothing afterwards."""
    sink = Collected()
    emitter.flush(5.0)
    emitter._reported.clear()  # what an earlier test reported once is reported again here
    emitter.configure(sink)
    yield sink
    emitter.flush(5.0)
    emitter.configure(None)


@pytest.fixture
def hooks(collected: Collected) -> Iterator[Collected]:
    """Auto-instrumentation installed for the test, every patch undone after it."""
    auto.install({})
    try:
        yield collected
    finally:
        auto.uninstall()
        tracker.reset()  # a failed test must not leave phases open


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(tracker, "clock", fake)
    return fake


@pytest.fixture(autouse=True)
def fresh_thread_state() -> Iterator[None]:
    tracker.reset()  # step indices, and whether the process was seen training, start anew
    yield
    tracker.reset()
