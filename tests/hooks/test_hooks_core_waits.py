"""The main thread's run and run-queue times (hooks/core_waits.py): read by the flusher, sent
when they moved, with the last reading of a flat stretch first."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from hookspans import Collected

from gpuwhy.hooks import core_waits
from gpuwhy.wire import CORE_WAIT_EVENT

SCHEDSTAT = Path(f"/proc/{os.getpid()}/task/{threading.main_thread().native_id}/schedstat")
HALF = core_waits.INTERVAL_NS


def _counters(sampler: core_waits._Sampler, now_ns: int) -> list[tuple[int, int, int]]:
    return [(e.t_ns, e.data["run_ns"], e.data["queued_ns"]) for e in sampler(now_ns)]


def test_readings_are_sent_when_they_move_and_a_flat_stretch_ends_with_its_last(
    tmp_path: Path,
) -> None:
    sampler = core_waits._Sampler()
    stats = tmp_path / "schedstat"
    sampler.path = str(stats)
    stats.write_text("100 10 5\n")
    assert _counters(sampler, HALF) == [(HALF, 100, 10)]
    assert _counters(sampler, HALF + HALF // 2) == []  # within the interval: not read
    assert _counters(sampler, 2 * HALF) == []  # read, unmoved: held back
    assert _counters(sampler, 3 * HALF) == []
    stats.write_text("300 50 9\n")
    # The flat stretch's last reading, then the new one: the growth lies between them.
    assert _counters(sampler, 4 * HALF) == [(3 * HALF, 100, 10), (4 * HALF, 300, 50)]
    stats.write_text("400 50 10\n")
    assert _counters(sampler, 5 * HALF) == [(5 * HALF, 400, 50)]


def test_a_kernel_without_the_file_is_asked_once(tmp_path: Path) -> None:
    sampler = core_waits._Sampler()
    sampler.path = str(tmp_path / "absent")
    assert sampler(HALF) == []
    (tmp_path / "absent").write_text("1 2 3\n")
    assert sampler(10 * HALF) == []  # not read again


@pytest.mark.skipif(not SCHEDSTAT.exists(), reason="no scheduler statistics on this kernel")
def test_the_main_thread_s_own_counters_reach_the_sink(hooks: Collected) -> None:
    start, ran_before = time.monotonic_ns(), _ran()
    end = time.perf_counter() + 0.8  # busy past the sampling interval: the counters move
    while time.perf_counter() < end:
        sum(range(1000))
    events = [e for e in hooks.events(CORE_WAIT_EVENT) if e.t_ns >= start]
    ran_after = _ran()
    assert events, "no reading sent"
    assert all(e.data["pid"] == os.getpid() for e in events)
    runs = [e.data["run_ns"] for e in events]
    # This thread's own counter, read by another thread while it computed.
    assert ran_before <= runs[0] <= runs[-1] <= ran_after
    assert runs[-1] > ran_before


def _ran() -> int:
    return int(SCHEDSTAT.read_text().split()[0])
