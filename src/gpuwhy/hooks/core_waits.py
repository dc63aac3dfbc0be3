"""How long the thread that runs the steps waited for a core (Linux scheduler statistics).

Where the job's own workers (DataLoader processes that decode, say) keep every core busy, the
thread that runs the steps is often ready to run and not running: it waits in the scheduler's run
queue. No stamp of the input sees that time (the next batch was already queued), yet a cheaper
batch gives it back. Measured on two cores (docs/data-wait.md, "Known shortfalls"): beside two
workers burning 30 ms of CPU a batch, a step of 19-21 ms spent 8.9-9.8 ms waiting for a core,
and 1.5-3.1 ms with free batches. Linux counts it per thread: /proc/<pid>/task/<tid>/schedstat
holds the nanoseconds the thread ran and the nanoseconds it waited on a run queue
(references.md#linux-schedstat).

`install()` gives the emitter's flusher thread a sampler (never the training thread's time): at
most every INTERVAL_NS it reads the main thread's counters, one read of a file of ~30 bytes, and
emits them as an Event ("core_wait": cumulative `run_ns` and `queued_ns`, `pid`) when they moved.
After a stretch in which they did not, the last reading of that stretch is sent first, so the
analysis can interpolate between readings. Where the file is missing (not Linux, a kernel without
scheduler statistics) nothing is read again. Steps run on another thread are not counted.
"""

from __future__ import annotations

import os
import threading

from gpuwhy.hooks import emitter
from gpuwhy.model import Event
from gpuwhy.wire import CORE_WAIT_EVENT

INTERVAL_NS = 500_000_000


class _Sampler:
    def __init__(self) -> None:
        self.path = f"/proc/{os.getpid()}/task/{threading.main_thread().native_id}/schedstat"
        self.broken = False
        self.last_ns = 0  # the last reading's time
        self.last: tuple[int, int] | None = None  # its (run_ns, queued_ns)
        self.sent_ns = 0  # the time of the last reading sent

    def __call__(self, now_ns: int) -> list[Event]:
        if self.broken or now_ns - self.last_ns < INTERVAL_NS:
            return []
        try:
            with open(self.path, "rb") as stats:
                run, queued = (int(field) for field in stats.read().split()[:2])
        except (OSError, ValueError):
            self.broken = True
            return []
        events = []
        if (run, queued) != self.last:
            if self.last is not None and self.sent_ns != self.last_ns:  # a flat stretch ends
                events.append(_event(self.last_ns, *self.last))
            events.append(_event(now_ns, run, queued))
            self.sent_ns = now_ns
        self.last_ns, self.last = now_ns, (run, queued)
        return events


def _event(t_ns: int, run_ns: int, queued_ns: int) -> Event:
    return Event(
        t_ns=t_ns,
        kind=CORE_WAIT_EVENT,
        message="the main thread's CPU and run-queue time",
        data={"run_ns": run_ns, "queued_ns": queued_ns, "pid": emitter.pid()},
    )


def install() -> None:
    """Sample the main thread's counters from now on, in this process (idempotent)."""
    emitter.set_sampler(_Sampler())


def uninstall() -> None:
    emitter.set_sampler(None)
