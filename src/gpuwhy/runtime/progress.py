"""Recent step progress, for the live status line: step rate and the share of time spent waiting.

Fed with every record the job's hooks send (listener thread); read by the live line twice a second.
Memory is bounded: only the spans of the last window are kept. Like the report's figures
(analysis/steady.py), the live ones describe the steps that repeat, of the phase the process is
in: its other phases' spans in the window and its leading warm-up steps (the first step's
tracing, workers starting) are left out, so the first verdict is the final one's.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from gpuwhy.model import Event, Record, Span, SpanKind
from gpuwhy.rank_identity import RankIdentity
from gpuwhy.telemetry.processes import ProcessDirectory
from gpuwhy.warmup import first_steady

WINDOW_NS = 10_000_000_000
"""How far back the live rates look: long enough to smooth Keras' per-epoch rhythm."""

_MAX_SPANS = 20_000  # bound on memory if a job reports thousands of steps a second

_Item = tuple[int, int, int, int | None, bool, str]  # a span: start, end, steps, pid, wait?, phase


@dataclass(frozen=True)
class Progress:
    """What the job's hooks reported over the recent window."""

    steps_total: int
    steps_per_s: float | None  # None until two step spans have ended
    wait_share: float | None  # WAIT time / time covered by steps and waits; None without waits
    phase: str | None  # phase of the newest step or phase span


@dataclass(frozen=True)
class ProcessProgress:
    """One stepping process (a rank) over the recent window, for live metrics."""

    pid: int | None
    identity: RankIdentity | None
    steps_total: int
    step_s: float | None  # wall time per step, its wait included; None before two steps ended
    wait_share: float | None
    phase: str | None
    device: int | None = None  # the GPU NVML saw it on
    uuid: str | None = None


class StepMeter:
    """Counts STEP spans and WAIT time as records pass by (thread-safe, O(1) per record).

    The wait share follows the analysis (`gpuwhy.analysis.phases`): WAIT spans lie between
    steps, so the share is WAIT time over the wall time the process's steps and waits cover;
    of several processes (data-parallel ranks), the one that waits most sets it.
    """

    def __init__(self, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        # (start_ns, end_ns, steps, pid, is_wait, phase) of recent STEP and WAIT spans
        self._spans: deque[_Item] = deque(maxlen=_MAX_SPANS)
        self._steps_total = 0
        self._phase: str | None = None
        self._steps_of: dict[int | None, int] = {}  # pid -> steps so far
        self._phase_of: dict[int | None, str] = {}  # pid -> phase of its newest step
        self._processes = ProcessDirectory()

    def observe(self, record: Record) -> None:
        """Take note of one record: spans, and the events that say who a process is."""
        if isinstance(record, Event):
            self._observe_event(record)
            return
        if not isinstance(record, Span):
            return
        with self._lock:
            if record.kind is SpanKind.STEP:
                steps = max(1, record.steps)
                item = (record.start_ns, record.end_ns, steps, record.pid, False, record.phase)
                self._spans.append(item)
                self._steps_total += steps
                self._phase = record.phase
                self._steps_of[record.pid] = self._steps_of.get(record.pid, 0) + steps
                self._phase_of[record.pid] = record.phase
            elif record.kind is SpanKind.WAIT:
                self._spans.append(
                    (record.start_ns, record.end_ns, 0, record.pid, True, record.phase)
                )
            elif self._phase is None:
                self._phase = record.phase

    def _observe_event(self, event: Event) -> None:
        with self._lock:
            self._processes.observe(event)

    def processes(self, now_ns: int | None = None) -> list[ProcessProgress]:
        """Every process that stepped: its steps so far and its recent step time and wait."""
        now = self._clock() if now_ns is None else now_ns
        since = now - WINDOW_NS
        with self._lock:
            recent = [item for item in self._spans if item[1] >= since]
            steps_of, phase_of = dict(self._steps_of), dict(self._phase_of)
            known = {pid: self._who(pid) for pid in steps_of}
        by_pid: dict[int | None, list[_Item]] = {}
        for item in recent:
            by_pid.setdefault(item[3], []).append(item)
        result = []
        for pid, total in steps_of.items():
            rate, share = _rate_and_share(by_pid.get(pid, []), phase_of.get(pid))
            identity, (device, uuid) = known[pid]
            result.append(
                ProcessProgress(
                    pid=pid,
                    identity=identity,
                    steps_total=total,
                    step_s=1 / rate if rate else None,
                    wait_share=share,
                    phase=phase_of.get(pid),
                    device=device,
                    uuid=uuid,
                )
            )
        return result

    def _who(self, pid: int | None) -> tuple[RankIdentity | None, tuple[int | None, str | None]]:
        return self._processes.identity_of(pid), self._processes.gpu_of(pid)

    def progress(self, now_ns: int | None = None) -> Progress:
        """Rates over the last `WINDOW_NS` before ``now_ns``."""
        now = self._clock() if now_ns is None else now_ns
        since = now - WINDOW_NS
        with self._lock:
            recent = [item for item in self._spans if item[1] >= since]
            total, phase = self._steps_total, self._phase
            phase_of = dict(self._phase_of)
        per_pid: dict[int | None, list[_Item]] = {}
        for item in recent:
            per_pid.setdefault(item[3], []).append(item)
        rates, shares = [], []
        for pid, spans in per_pid.items():
            rate, share = _rate_and_share(spans, phase_of.get(pid))
            if rate is not None:
                rates.append(rate)
            if share is not None:
                shares.append(share)
        # Ranks step in lockstep: the busiest one's rate is the job's rate, and the slowest
        # input's wait the job's wait (analysis/phases.py counts it so too).
        rate = max(rates) if rates else None
        share = max(shares) if shares else None
        return Progress(steps_total=total, steps_per_s=rate, wait_share=share, phase=phase)


def _rate_and_share(spans: list[_Item], phase: str | None) -> tuple[float | None, float | None]:
    """One process's steps per second and wait share over its recent spans of `phase` (its
    newest step's), from its first step that is no warm-up on."""
    spans = [item for item in spans if item[5] == phase] if phase is not None else spans
    if not spans:
        return None, None
    steps = sorted((start, end, n) for start, end, n, _, is_wait, _ in spans if not is_wait)
    begin = min(start for start, *_ in spans)
    if steps:
        warm = _leading_warmup(steps)
        if warm:
            steps = steps[warm:]
            begin = steps[0][0]
    rate = None
    if len(steps) >= 2:
        first_end = min(end for _, end, _ in steps)
        last_end = max(end for _, end, _ in steps)
        # Steps completed after the first one, over the time they took to complete.
        counted = sum(n for _, end, n in steps if end > first_end)
        if last_end > first_end:
            rate = counted * 1e9 / (last_end - first_end)
    share = None
    waits = [(max(start, begin), end) for start, end, _, _, is_wait, _ in spans if is_wait]
    waited = sum(end - start for start, end in waits if end > start)
    extent = max(end for _, end, *_ in spans) - begin
    if waits and extent > 0:
        share = min(1.0, waited / extent)
    return rate, share


def _leading_warmup(steps: list[tuple[int, int, int]]) -> int:
    """How many of the leading `steps` (start, end, count; sorted) are warm-up, as in the
    analysis (gpuwhy/warmup.py)."""
    starts, ends, counts = zip(*steps, strict=True)
    per_step = sorted((end - start) / n for start, end, n in steps)
    return first_steady(starts, ends, counts, 0, len(steps), per_step[len(per_step) // 2])
