"""The shapes of a synthetic training run: its step timeline and what the GPUs show, per slot.

Constructed, not measured: a data-parallel Keras-style job on a node of identical GPUs (one left
idle), epochs of training steps with a validation pass after each, steps that wait a millisecond
or two for their input except for occasional stalls of a few hundred ms (the data-wait gaps a
loader shows when it refills a shuffle buffer or opens the next file), power-capped throttling
episodes now and then, a memory plateau reached while the model is built. Utilization is the
share of time kernels ran, as NVML defines it (references.md#nvml-utilization): the polled counter
over the last second, the driver's buffered samples and GPM over the last 1/6 s, so a stall shows in
the buffered samples and is smoothed in the polled counter, as on real GPUs
(references.md#nvml-utilization).

Everything is deterministic from the seed and computed a slot at a time, with per-value noise
taken from precomputed tables by slicing (C speed): a day of 8 GPUs at 10 Hz in about a minute.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate, repeat
from operator import add

from gpuwhy.model import NS_PER_S, SpanKind

NS_PER_MS = 1_000_000
# driver sample period: 1/6 s (references.md#nvml-utilization, the fastest case)
BUFFER_PERIOD_NS = 166_667_000
GPM_PERIOD_NS = BUFFER_PERIOD_NS
STARTUP_NS = 45 * NS_PER_S  # imports and model building before the first epoch
TRAIN_STEPS = 2_000  # per epoch, in a long run (shorter runs get shorter epochs)
STEP_NS = 78 * NS_PER_MS  # compute of one training step
VALIDATION_STEP_NS = 30 * NS_PER_MS
VALIDATION_BUSY = 0.7  # share of a validation step's time in kernels (small eval batches)
STALL_PROBABILITY = 0.02  # a training step that waits for a refill of the input pipeline
STALL_NS = (200 * NS_PER_MS, 600 * NS_PER_MS)
THROTTLE_EVERY_NS = 3 * 3600 * NS_PER_S  # a power-cap episode every ~3 h of run time
THROTTLE_NS = (5 * 60 * NS_PER_S, 15 * 60 * NS_PER_S)
_NOISE = 1 << 16


@dataclass(frozen=True, slots=True)
class SpanRow:
    """A span as the job's hooks would report it (at its end, in this order)."""

    phase: str
    kind: SpanKind
    start_ns: int
    end_ns: int
    step: int | None


class Timeline:
    """Generates the job's spans and busy intervals in time order, slot by slot."""

    def __init__(self, start_ns: int, end_ns: int, seed: int) -> None:
        self._rng = random.Random(f"timeline-{seed}")
        self.start_ns = start_ns
        self.end_ns = end_ns
        # At least three epochs fit in a short run; a long one has epochs of TRAIN_STEPS.
        usable_s = max((end_ns - start_ns - STARTUP_NS) / NS_PER_S - 20, 0)
        self.train_steps = min(TRAIN_STEPS, max(20, int(usable_s / 0.095 / 3)))
        self.validation_steps = max(self.train_steps // 10, 2)
        self._epoch_ns = int((self.train_steps * 0.095 + self.validation_steps * 0.035) * NS_PER_S)
        self._t = start_ns + STARTUP_NS
        self._busy: list[tuple[int, int]] = []  # kernels running, in order, recent only
        self._pending: list[SpanRow] = []  # reported, in report order
        self._epoch = 0
        self._step = 0
        self.throttles = self._throttles()

    def _throttles(self) -> list[tuple[int, int]]:
        episodes = []
        t = self.start_ns + self._rng.randrange(THROTTLE_EVERY_NS // 2, THROTTLE_EVERY_NS)
        while t < self.end_ns:
            length = self._rng.randrange(*THROTTLE_NS)
            episodes.append((t, t + length))
            t += length + self._rng.randrange(THROTTLE_EVERY_NS // 2, 3 * THROTTLE_EVERY_NS // 2)
        return episodes

    def throttled(self, t_ns: int) -> bool:
        index = bisect.bisect_right(self.throttles, (t_ns, 1 << 62)) - 1
        return index >= 0 and self.throttles[index][0] <= t_ns < self.throttles[index][1]

    def _epoch_spans(self) -> None:
        """Append one epoch (training then validation) to the pending spans."""
        rng = self._rng
        gauss, random_ = rng.gauss, rng.random
        for phase, steps, step_ns, busy_share in (
            ("train", self.train_steps, STEP_NS, 1.0),
            ("validation", self.validation_steps, VALIDATION_STEP_NS, VALIDATION_BUSY),
        ):
            phase_start = self._t
            t = phase_start + 1000  # the phase's first wait starts 1 µs after the phase
            first_step = self._step if phase == "train" else 0
            for index in range(steps):
                wait = int(rng.lognormvariate(13.9, 0.4))  # ~1.1 ms median
                if phase == "train" and random_() < STALL_PROBABILITY:
                    wait += rng.randrange(*STALL_NS)
                compute = max(int(gauss(step_ns, step_ns * 0.04)), step_ns // 2)
                step = first_step + index
                self._pending.append(SpanRow(phase, SpanKind.WAIT, t, t + wait, step))
                start = t + wait
                end = start + compute
                self._busy.append((start, start + int(compute * busy_share)))
                self._pending.append(SpanRow(phase, SpanKind.STEP, start, end, step))
                t = end + 200_000  # 0.2 ms of callbacks between steps
            if phase == "train":
                self._step += steps
            self._pending.append(SpanRow(phase, SpanKind.PHASE, phase_start, t, None))
            self._t = t + 50_000
        self._epoch += 1

    def _generate(self, until_ns: int) -> None:
        while self._t < until_ns + 10 * NS_PER_S:
            if self._t + self._epoch_ns > self.end_ns - 20 * NS_PER_S:  # then saving, exit
                return
            self._epoch_spans()

    def advance(self, until_ns: int) -> list[SpanRow]:
        """Spans reported (ended) before `until_ns`, in report order."""
        self._generate(until_ns)
        done = [s for s in self._pending if s.end_ns <= until_ns]
        self._pending = [s for s in self._pending if s.end_ns > until_ns]
        return done

    def busy_function(self, low_ns: int, high_ns: int) -> BusyTime:
        """Cumulative kernel time over [low_ns, high_ns) (intervals older are forgotten)."""
        self._generate(high_ns)
        self._busy = [b for b in self._busy if b[1] > low_ns]
        return BusyTime([b for b in self._busy if b[0] < high_ns])


class BusyTime:
    """B(t): nanoseconds of kernel time before t, over a list of disjoint sorted intervals."""

    def __init__(self, intervals: list[tuple[int, int]]) -> None:
        self.starts = [s for s, _ in intervals]
        self.ends = [e for _, e in intervals]
        self.before = [0, *accumulate(e - s for s, e in intervals)]

    def at(self, t_ns: int) -> int:
        index = bisect.bisect_right(self.starts, t_ns) - 1
        if index < 0:
            return 0
        return self.before[index] + min(t_ns, self.ends[index]) - self.starts[index]

    def shares(self, times: list[int], window_ns: int) -> list[float]:
        """Share of (t - window, t] in kernels, for each t."""
        at = self.at
        return [(at(t) - at(t - window_ns)) / window_ns for t in times]


class Noise:
    """Deterministic integer noise, served as slices of precomputed tables."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(f"noise-{seed}")
        self._tables: dict[float, list[int]] = {}

    def take(self, sigma: float, count: int) -> list[int]:
        table = self._tables.get(sigma)
        if table is None:
            gauss = random.Random(f"table-{sigma}").gauss
            values = [round(gauss(0.0, sigma)) for _ in range(_NOISE)]
            table = self._tables[sigma] = values + values[:4096]
        if count > 4096:
            return [v for _ in range(0, count, 4096) for v in self.take(sigma, 4096)][:count]
        offset = self._rng.randrange(_NOISE)
        return table[offset : offset + count]


def clamp(values: Iterable[int], low: int, high: int) -> list[int]:
    """Values limited to [low, high] (C-speed map)."""
    return list(map(min, map(max, values, repeat(low)), repeat(high)))


def plus(base: list[int], noise: list[int]) -> list[int]:
    return list(map(add, base, noise))
