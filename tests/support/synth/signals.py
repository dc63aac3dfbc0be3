"""What a synthetic run's GPUs and host report, one storage slot at a time, as full-row columns.

Constructed values (see shapes.py for the run they follow): NVML-shaped GPU samples for
each device (the last of several left idle), the driver's buffered utilization samples every
1/6 s for the busy ones (an idle GPU has none: NVML answers NOT_FOUND, references.md#nvml-samples),
and host samples every 0.5 s. Values that NVML refreshes in its slow lane (PCIe throughput, the
job's share of the GPU) hold for a second, as gpuwhy's sampler records them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from operator import add

from gpuwhy.model import NS_PER_S
from support.synth.shapes import (
    BUFFER_PERIOD_NS,
    GPM_PERIOD_NS,
    STARTUP_NS,
    BusyTime,
    Noise,
    Timeline,
    clamp,
)

MiB = 1 << 20
GiB = 1 << 30
PLATEAU_BYTES = 61 * GiB + 800 * MiB  # model, optimizer state and activations, reached at build
HOST_PERIOD_NS = NS_PER_S // 2
_JITTER = 1 << 16

Column = Sequence[int | None]
Block = tuple[str, tuple[int, ...], list[Column]]


class Signals:
    """Per-slot columns of every sample stream of a synthetic run."""

    def __init__(self, timeline: Timeline, gpus: int, rate_hz: float, seed: int) -> None:
        self.timeline = timeline
        self.gpus = gpus
        self.period_ns = int(NS_PER_S / rate_hz)
        self.idle = {gpus - 1} if gpus > 1 else set()
        self.noise = Noise(seed)
        rng = random.Random(f"jitter-{seed}")
        # Sampler ticks wake a little late (exponential, ~80 µs): deterministic per tick index.
        self._jitter = [int(rng.expovariate(1 / 80_000)) for _ in range(_JITTER)]
        self._temperature = 33.0

    def _times(self, origin: int, period: int, low: int, high: int, salt: int) -> list[int]:
        """origin + i·period + jitter(i) for the i that fall in [low, high)."""
        jitter = self._jitter
        first = max((low - origin) // period - 1, 0)
        last = (high - origin) // period + 1
        times = (
            origin + i * period + jitter[(i * 40_503 + salt) % _JITTER]
            for i in range(first, last + 1)
        )
        return [t for t in times if low <= t < high]

    def slot(self, low: int, high: int) -> list[Block]:
        """The blocks (stream, key, columns) of the samples with low <= t < high."""
        start = self.timeline.start_ns
        busy = self.timeline.busy_function(low - 2 * NS_PER_S, high)
        times = self._times(start, self.period_ns, low, high, 0)
        blocks: list[Block] = []
        if times:
            polled = [round(100 * s) for s in busy.shares(times, NS_PER_S)]
            gpm = [round(880 * s) for s in busy.shares(times, GPM_PERIOD_NS)]
            throttled = [self.timeline.throttled(t) for t in times]
            shared = self._shared(times, polled, throttled)
            for device in range(self.gpus):
                columns = (
                    self._idle_gpu(times, device)
                    if device in self.idle
                    else self._busy_gpu(times, device, polled, gpm, shared)
                )
                blocks.append(("gpu", (device,), [times, [device] * len(times), *columns]))
        for device in range(self.gpus):
            if device in self.idle:
                continue
            util = self._util(busy, device, low, high)
            if util:
                blocks.append(("util", (device,), util))
        host_times = self._times(start + 20_000, HOST_PERIOD_NS, low, high, 7)
        if host_times:
            blocks.append(("host", (), self._host(host_times, busy.shares(host_times, NS_PER_S))))
        return blocks

    def _shared(
        self,
        times: list[int],
        polled: list[int],
        throttled: list[bool],
    ) -> dict[str, list[int]]:
        start = self.timeline.start_ns
        temperatures = []
        temperature = self._temperature
        step = self.period_ns / 60 / NS_PER_S  # first-order lag, 60 s time constant
        for util in polled:
            temperature += (34 + 0.36 * util - temperature) * step
            temperatures.append(int(temperature))
        self._temperature = temperature
        ramp = STARTUP_NS * 2 // 3
        memory = [
            min(PLATEAU_BYTES, 600 * MiB + PLATEAU_BYTES * max(t - start, 0) // ramp)
            + 2 * MiB * min((t - start) // (1200 * NS_PER_S), 32)
            for t in times
        ]
        seconds = [t // NS_PER_S for t in times]
        first = seconds[0]
        return {
            "temperature": temperatures,
            "memory": memory,
            "clock": [
                345 if not u else 1755 if hot else 1980
                for u, hot in zip(polled, throttled, strict=True)
            ],
            "power": [
                695_000 if hot else 72_000 + 6_100 * u if u else 70_000
                for u, hot in zip(polled, throttled, strict=True)
            ],
            "reasons": [
                4 if hot else 0 if u else 1 for u, hot in zip(polled, throttled, strict=True)
            ],
            "second": [s - first for s in seconds],
            "per_second": _per_second(seconds, polled),
        }

    def _busy_gpu(
        self,
        times: list[int],
        device: int,
        polled: list[int],
        gpm: list[int],
        shared: dict[str, list[int]],
    ) -> list[Column]:
        n = len(times)
        take = self.noise.take
        util = _around(polled, take(1.0, n), 100)
        util_mem = _around([round(0.42 * u) for u in polled], take(1.0, n), 100)
        memory = [m + device * 2 * MiB for m in shared["memory"]]
        clock = [
            c + 15 * e if c == 1755 else c
            for c, e in zip(shared["clock"], take(1.0, n), strict=True)
        ]
        power = list(map(add, shared["power"], take(6000.0, n)))
        temperature = [t + device % 3 for t in shared["temperature"]]
        per_second = shared["per_second"]
        count = len(per_second)
        rx = clamp(map(add, [24_000 * u for u in per_second], take(250_000.0, count)), 0, 1 << 40)
        tx = clamp(map(add, [1_400 * u for u in per_second], take(30_000.0, count)), 0, 1 << 40)
        job_sm = _around(per_second, take(1.0, count), 100)
        second = shared["second"]
        sm = _around(gpm, take(12.0, n), 1000)
        occupancy = _around([round(0.42 * s) for s in sm], take(8.0, n), 1000)
        tensor = _around([round(0.63 * s) for s in sm], take(10.0, n), 1000)
        dram = _around([round(0.47 * s) for s in sm], take(10.0, n), 1000)
        return [
            util,
            util_mem,
            memory,
            clock,
            power,
            temperature,
            [tx[i] for i in second],
            [rx[i] for i in second],
            [5 if u else 1 for u in polled],
            [16] * n,
            list(shared["reasons"]),
            sm,
            occupancy,
            tensor,
            dram,
            [m - 520 * MiB if m > GiB else 0 for m in memory],
            [job_sm[i] for i in second],
        ]

    def _idle_gpu(self, times: list[int], device: int) -> list[Column]:
        n = len(times)
        take = self.noise.take
        zeros = [0] * n
        return [
            zeros,
            zeros,
            [574 * MiB] * n,
            [345] * n,
            [68_000 + e for e in take(1500.0, n)],
            [31] * n,
            clamp(take(40.0, n), 0, 1 << 30),
            clamp(take(40.0, n), 0, 1 << 30),
            [1] * n,
            [16] * n,
            [1] * n,
            zeros,
            zeros,
            zeros,
            zeros,
            zeros,
            zeros,
        ]

    def _util(self, busy: BusyTime, device: int, low: int, high: int) -> list[Column]:
        # The driver's own sample grid: µs timestamps, a phase of its own per GPU.
        origin = self.timeline.start_ns + 5_000_000 + 13_700_000 * device + 417
        times = self._times(origin, BUFFER_PERIOD_NS, low, high, 11 + device)
        times = [t - (t - 417) % 1000 for t in times]  # µs resolution, as NVML stamps them
        shares = busy.shares(times, BUFFER_PERIOD_NS)
        polled = busy.shares(times, NS_PER_S)
        kept = [i for i, p in enumerate(polled) if p > 0]  # idle: NVML has no new samples
        if not kept:
            return []
        times = [times[i] for i in kept]
        shares = [shares[i] for i in kept]
        n = len(times)
        take = self.noise.take
        gpu = _around([round(100 * s) for s in shares], take(1.0, n), 100)
        memory = _around([round(42 * s) for s in shares], take(1.0, n), 100)
        values: list[int | None] = [0] * (2 * n)
        values[0::2] = gpu
        values[1::2] = memory
        return [[t for t in times for _ in (0, 1)], [device] * (2 * n), [1, 2] * n, values]

    def _host(self, times: list[int], shares: list[float]) -> list[Column]:
        start = self.timeline.start_ns
        n = len(times)
        take = self.noise.take
        busy = [s > 0 for s in shares]
        cpu = [310 + e if b else 45 + e // 4 for b, e in zip(busy, take(20.0, n), strict=True)]
        job_cpu = [
            4100 + e if b else 980 + e // 4 for b, e in zip(busy, take(250.0, n), strict=True)
        ]
        rss = [
            min(14 * GiB + 200 * MiB, 300 * MiB + 14 * GiB * max(t - start, 0) // STARTUP_NS)
            for t in times
        ]
        processes = [9 if t - start > 20 * NS_PER_S else 1 for t in times]
        available = [190 * GiB - r for r in rss]
        return [times, clamp(cpu, 0, 1000), clamp(job_cpu, 0, 100_000), rss, processes, available]


def _around(base: list[int], noise: list[int], high: int) -> list[int]:
    """base + noise within [0, high], and 0 where the base is 0 (an idle reading is exact)."""
    return clamp([b + e if b else 0 for b, e in zip(base, noise, strict=True)], 0, high)


def _per_second(seconds: list[int], polled: list[int]) -> list[int]:
    """The polled utilization at the first tick of each second of the slot (slow lane)."""
    first = seconds[0]
    values = [0] * (seconds[-1] - first + 1)
    seen = [False] * len(values)
    for second, util in zip(seconds, polled, strict=True):
        if not seen[second - first]:
            seen[second - first] = True
            values[second - first] = util
    return values
