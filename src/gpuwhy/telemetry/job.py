"""JobTracker: which processes make up the job (the command's whole process tree).

Training jobs fork: data-loader workers, `torchrun` ranks, a shell wrapper around python. The
job is the root process and all its descendants. Walking the tree scans every process of the
machine (psutil reads /proc/*/stat of each: ~2 ms for 90 processes here, tens of ms on a node
with thousands), so it is refreshed at most every `refresh_s` — and less often where one scan
is slow, keeping the scans under SCAN_SHARE of one core; between refreshes the cached set is
returned in O(1).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

SCAN_SHARE = 0.005  # at most 0.5 % of one core for walking the process table


class JobTracker:
    """The pids of a job's process tree, refreshed at most every `refresh_s`."""

    def __init__(
        self,
        root_pid: int | None,
        *,
        refresh_s: float = 1.0,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.root_pid = root_pid
        self._refresh_ns = int(refresh_s * 1e9)
        self.refresh_interval_ns = self._refresh_ns  # grows if a scan is slow (SCAN_SHARE)
        self._clock = clock
        self._last_ns: int | None = None
        self._processes: dict[int, Any] = {}  # pid -> psutil.Process (kept: CPU deltas need it)
        self._lock = threading.Lock()  # the host source and NVML's slow lane both ask

    def pids(self) -> frozenset[int]:
        """The job's live pids as of the last refresh (empty without a root)."""
        self._maybe_refresh()
        return frozenset(self._processes)

    def processes(self) -> list[Any]:
        """The job's psutil.Process objects as of the last refresh (same objects across calls)."""
        self._maybe_refresh()
        return list(self._processes.values())

    def _maybe_refresh(self) -> None:
        if self.root_pid is None:
            return
        with self._lock:
            now = self._clock()
            if self._last_ns is not None and now - self._last_ns < self.refresh_interval_ns:
                return
            self._last_ns = now
            self._refresh()
            scan_ns = self._clock() - now
            self.refresh_interval_ns = max(self._refresh_ns, int(scan_ns / SCAN_SHARE))

    def _refresh(self) -> None:
        import psutil

        root_pid = self.root_pid
        assert root_pid is not None
        found: dict[int, Any] = {}
        try:
            root = self._processes.get(root_pid) or psutil.Process(root_pid)
            if root.is_running():
                found[root.pid] = root
                for child in root.children(recursive=True):
                    known = self._processes.get(child.pid)
                    # psutil compares pid and start time: a reused pid is a new process.
                    found[child.pid] = known if known is not None and known == child else child
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
        if root_pid not in found:
            # The root is gone: its orphans were re-parented, so keep the ones we knew.
            for pid, process in self._processes.items():
                try:
                    if process.is_running():
                        found[pid] = process
                except psutil.Error:
                    continue
        self._processes = found
