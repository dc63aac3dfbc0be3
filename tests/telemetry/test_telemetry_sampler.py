"""The Sampler with small real sources: fixed period, degraded sources, a failing sink.

The sources below are collaborators written for the test (constructed values, not GPU readings);
the Sampler is the thing under test.
"""

from __future__ import annotations

import time

from gpuwhy.model import DeviceInfo, Event, GpuSample, HostSample, Record, UtilKind, UtilSample
from gpuwhy.telemetry.sampler import Sampler


class Counter:
    """One GPU sample per read; optionally slow, to show the period does not drift."""

    def __init__(self, name: str = "counter", device: int = 0, read_s: float = 0.0) -> None:
        self.name = name
        self.device = device
        self.read_s = read_s
        self.reads: list[int] = []
        self.closed = 0

    def available(self) -> bool:
        return True

    def open(self) -> list[DeviceInfo]:
        return [DeviceInfo(self.device, f"constructed {self.name}")]

    def read(self, now_ns: int) -> list[Record]:
        if self.read_s:
            time.sleep(self.read_s)
        self.reads.append(now_ns)
        return [GpuSample(now_ns, self.device, util_gpu_pct=len(self.reads))]

    def close(self) -> None:
        self.closed += 1


class FailsOnThirdRead(Counter):
    def read(self, now_ns: int) -> list[Record]:
        if len(self.reads) == 2:
            raise RuntimeError("GPU is lost\nsecond line is dropped")
        return super().read(now_ns)


class Host:
    name = "host"

    def available(self) -> bool:
        return True

    def open(self) -> list[DeviceInfo]:
        return []

    def read(self, now_ns: int) -> list[Record]:
        return [HostSample(now_ns, cpu_system_pct=1.0)]

    def close(self) -> None:
        pass


class HoldsBack(Counter):
    """Keeps a sample of each read back until drained (as NVML's buffered samples are)."""

    def __init__(self, name: str = "holds back", fails: bool = False) -> None:
        super().__init__(name)
        self.held: list[Record] = []
        self.fails = fails

    def read(self, now_ns: int) -> list[Record]:
        self.held.append(UtilSample(now_ns, self.device, UtilKind.GPU, 50))
        return super().read(now_ns)

    def drain(self, now_ns: int) -> list[Record]:
        if self.fails:
            raise RuntimeError("driver gone")
        held, self.held = self.held, []
        return held


class Unavailable(Counter):
    unavailable_reason = "no driver here"

    def available(self) -> bool:
        return False


class OpenFails(Counter):
    def open(self) -> list[DeviceInfo]:
        raise OSError("device busy")


def _clock(step_ns: int = 100_000_000):
    now = [0]

    def clock() -> int:
        now[0] += step_ns
        return now[0]

    return clock


def test_a_failing_source_is_degraded_once_and_the_others_go_on() -> None:
    records: list[Record] = []
    good, flaky = Counter("good", 0), FailsOnThirdRead("flaky", 1)
    sampler = Sampler([good, flaky, Host()], records.append, clock=_clock())
    assert [d.index for d in sampler.open_sources()] == [0, 1]
    for _ in range(5):
        sampler.tick()
    assert sampler.degraded == {"flaky": "RuntimeError: GPU is lost"}
    events = [r for r in records if isinstance(r, Event)]
    assert len(events) == 1
    assert events[0].kind == "source_degraded" and events[0].data["source"] == "flaky"
    assert "\n" not in events[0].message
    assert len(good.reads) == 5 and len(flaky.reads) == 2
    assert sum(isinstance(r, HostSample) for r in records) == 5
    latest = sampler.latest()
    assert latest.gpus[0].util_gpu_pct == 5 and latest.gpus[1].util_gpu_pct == 2
    assert latest.host is not None and latest.t_ns == good.reads[-1]
    sampler.stop()
    assert good.closed == 1 and flaky.closed == 1


def test_unavailable_and_unopenable_sources_are_reported_not_raised() -> None:
    records: list[Record] = []
    good = Counter("good")
    sampler = Sampler(
        [Unavailable("nvml"), OpenFails("broken"), good], records.append, clock=_clock()
    )
    assert [d.name for d in sampler.open_sources()] == ["constructed good"]
    assert sampler.unavailable == {"nvml": "no driver here"}
    assert sampler.degraded == {"broken": "OSError: device busy"}
    sampler.tick()  # the sink hears of it from the sampler's own tick, not from start()
    assert [r.kind for r in records if isinstance(r, Event)] == ["source_degraded"]
    assert len(good.reads) == 1


def test_a_failing_sink_is_counted_and_sampling_goes_on() -> None:
    def sink(record: Record) -> None:
        raise ValueError("disk full")

    good = Counter()
    sampler = Sampler([good], sink, clock=_clock())
    sampler.open_sources()
    for _ in range(3):
        sampler.tick()
    assert len(good.reads) == 3 and sampler.stats.sink_errors == 3


def test_the_thread_keeps_a_fixed_period_despite_slow_reads() -> None:
    interval_s = 0.02
    slow = Counter(read_s=0.005)  # a tick-then-sleep loop would run 25 % slow with this
    sampler = Sampler([slow], lambda record: None, interval_s=interval_s)
    sampler.start()
    time.sleep(0.6)
    sampler.stop()
    sampler.stop()  # idempotent
    reads = slow.reads
    assert len(reads) >= 10
    periods = (reads[-1] - reads[0]) / (len(reads) - 1 + sampler.stats.late_ticks) / 1e9
    assert abs(periods - interval_s) < 0.1 * interval_s, periods
    assert slow.closed == 1
    stats = sampler.stats
    assert stats.ticks == len(reads)
    assert stats.busy_ns >= stats.ticks * 5_000_000
    assert 0 < stats.cpu_ns < stats.busy_ns  # sleeping in read costs wall time, not CPU


def test_stop_before_start_and_start_after_stop_are_harmless() -> None:
    good = Counter()
    sampler = Sampler([good], lambda record: None)
    sampler.stop()
    assert sampler.start() == []
    assert good.reads == [] and good.closed == 0


def test_stop_hands_on_what_a_source_held_back_then_closes_it() -> None:
    records: list[Record] = []
    holds, broken = HoldsBack(), HoldsBack("broken", fails=True)
    sampler = Sampler([holds, broken, Host()], records.append, clock=_clock())
    sampler.open_sources()
    for _ in range(3):
        sampler.tick()
    assert not any(isinstance(r, UtilSample) for r in records)
    sampler.stop()
    drained = [r for r in records if isinstance(r, UtilSample)]
    assert [r.t_ns for r in drained] == holds.reads  # every held sample, once, in order
    assert holds.closed == 1 and broken.closed == 1  # a failing drain does not stop the close
    assert sampler.degraded == {}
