"""HostSource: system CPU, available memory, and the job's process-tree CPU and memory (psutil).

CPU shares are computed from CPU-time counters between two reads of this source, timed by the
sampler's own clock, instead of `psutil.cpu_percent()`: that function keeps module-global state,
so a user's own call to it would silently change gpuwhy's numbers (and the other way round).
Cost on Linux: one read each of /proc/stat, /proc/meminfo and /proc/<pid>/stat per process of
the job (procfs.py; psutil elsewhere). Those reads are not free — the kernel formats the whole
file: measured here ~200 µs for /proc/stat, ~50 µs for /proc/meminfo, ~40 µs per process —
so the host is read at most every `interval_s` (default 0.5 s: CPU shares and memory change on
that scale, while the GPU is sampled at the sampler's own, faster rate); other ticks return [].
Each sample's CPU shares cover exactly the time since the previous one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gpuwhy.model import DeviceInfo, HostSample, Record
from gpuwhy.telemetry import procfs
from gpuwhy.telemetry.job import JobTracker


def busy_fraction(before: tuple[float, float], after: tuple[float, float]) -> float | None:
    """Share of CPU time spent busy between two (busy_s, total_s) readings, or None."""
    total = after[1] - before[1]
    if total <= 0:
        return None
    return min(max((after[0] - before[0]) / total, 0.0), 1.0)


def _system_times() -> tuple[float, float]:
    fast = procfs.system_times()
    if fast is not None:
        return fast
    import psutil

    times = psutil.cpu_times()
    # On Linux guest time is already counted in user/nice: leave it out of the total.
    total = sum(times) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return total - idle, total


def _memory_available() -> int:
    fast = procfs.memory_available()
    if fast is not None:
        return fast
    import psutil

    return int(psutil.virtual_memory().available)


def _psutil_reading(process: Any) -> tuple[int, float, float, int] | None:
    import psutil

    try:
        with process.oneshot():
            times = process.cpu_times()
            rss = process.memory_info().rss
            start = process.create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None  # exited since the last refresh of the tree
    return process.pid, float(start), times.user + times.system, int(rss)


class HostSource:
    """Host and job-tree readings; `job=None` reports the system only."""

    name = "host"

    def __init__(
        self,
        job: JobTracker | None = None,
        *,
        interval_s: float = 0.5,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.job = job
        # A tick a little early still counts: the sampler's ticks jitter around their grid.
        self._min_gap_ns = int(interval_s * 0.9e9)
        self._last_ns: int | None = None
        self._clock = clock
        self._system_before: tuple[float, float] | None = None
        self._job_cpu_before: dict[int, tuple[float, float]] = {}  # pid -> (start, CPU s)
        self._job_before_ns: int | None = None

    def available(self) -> bool:
        """True where psutil can be imported."""
        try:
            import psutil  # noqa: F401
        except ImportError:
            return False
        return True

    def open(self) -> list[DeviceInfo]:
        """Take the first CPU-time readings, so the first tick already has a share."""
        self._system_before = _system_times()
        now = self._clock()
        self._last_ns = now
        if self.job is not None:
            self._job_cpu_before = {
                pid: (start, cpu) for pid, start, cpu, _ in self._job_readings()
            }
            self._job_before_ns = now
        return []

    def read(self, now_ns: int) -> list[Record]:
        """One HostSample at `now_ns`, or [] if the last one is less than `interval_s` old."""
        if self._last_ns is not None and now_ns - self._last_ns < self._min_gap_ns:
            return []
        self._last_ns = now_ns
        system = _system_times()
        share = None if self._system_before is None else busy_fraction(self._system_before, system)
        self._system_before = system
        job_cpu_pct: float | None = None
        job_rss: int | None = None
        job_count: int | None = None
        if self.job is not None:
            readings = self._job_readings()
            before = self._job_cpu_before
            if self._job_before_ns is not None and now_ns > self._job_before_ns:
                # Only processes seen at both reads (same start time: not a reused pid); a
                # process's CPU before we first saw it did not necessarily happen in between.
                used = sum(
                    cpu - before[pid][1]
                    for pid, start, cpu, _ in readings
                    if pid in before and before[pid][0] == start
                )
                job_cpu_pct = round(
                    max(used, 0.0) / ((now_ns - self._job_before_ns) / 1e9) * 100, 1
                )
            self._job_cpu_before = {pid: (start, cpu) for pid, start, cpu, _ in readings}
            self._job_before_ns = now_ns
            job_rss = sum(rss for *_, rss in readings)
            job_count = len(readings)
        return [
            HostSample(
                t_ns=now_ns,
                cpu_system_pct=None if share is None else round(share * 100, 1),
                job_cpu_pct=job_cpu_pct,
                job_rss_bytes=job_rss,
                job_processes=job_count,
                memory_available_bytes=_memory_available(),
            )
        ]

    def _job_readings(self) -> list[tuple[int, float, float, int]]:
        """(pid, start time, CPU seconds, RSS bytes) of each live process of the job."""
        assert self.job is not None
        readings: list[tuple[int, float, float, int]] = []
        process: Any
        for process in self.job.processes():
            fast = procfs.process_stat(process.pid)
            if fast is not None:
                readings.append((process.pid, float(fast[0]), fast[1], fast[2]))
                continue
            reading = _psutil_reading(process)
            if reading is not None:
                readings.append(reading)
        return readings

    def close(self) -> None:
        """Nothing to release."""
