"""When NvmlSource fetches the driver's buffered utilization samples (SampleCadence).

The samples are the H200's own: the utilization sample times of a recording of the 2026-11-26
capture (tests/data/gpu/2026-11-26-nvidia-h200), 200 ms apart with the driver's jitter. The
driver's buffer around them is a ring of a given size, written for the test: its size is what
NVML does not document, so the cadence must keep every sample whatever it is.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from gpuwhy.model import UtilKind
from gpuwhy.recording import Recording
from gpuwhy.telemetry import nvml_decode as nd
from support import ROOT

RECORDING = ROOT / "tests/data/gpu/2026-11-26-nvidia-h200/healthy/slow-1.gpuwhy.db"
TICK_NS = 100_000_000  # the sampler's 10 Hz


def h200_stamps_us(repeat: int = 6) -> list[int]:
    """The recording's GPU utilization sample times (µs), repeated end to end for a long run."""
    with Recording.open(RECORDING) as recording:
        times = [s.t_ns // 1000 for s in recording.util_samples() if s.kind is UtilKind.GPU]
    span = times[-1] - times[0] + 200_000
    return [t + k * span - times[0] + 1 for k in range(repeat) for t in times]


def ring(stamps: list[int], size: int, now_us: int) -> list[int]:
    """What a driver buffer of `size` samples holds at `now_us`: the newest samples so far."""
    return [t for t in stamps if t <= now_us][-size:]


def fetches(stamps: list[int], size: int, dry: tuple[int, int] | None = None) -> Iterator[tuple]:
    """Drive a cadence over the stamps tick by tick and drain it at the end; yields (cadence,
    fetched stamps, interval after the fetch) per fetch. `dry` is a (start, end) µs window in
    which the buffer gets nothing."""
    if dry is not None:
        stamps = [t for t in stamps if not dry[0] <= t < dry[1]]
    cadence = nd.SampleCadence()
    last_seen = 0
    end_ns = (stamps[-1] + 1) * 1000
    for now_ns in [*range(0, end_ns, TICK_NS), end_ns]:
        if not cadence.due(now_ns) and now_ns != end_ns:  # the end: the drain when sampling stops
            continue
        fresh = [t for t in ring(stamps, size, now_ns // 1000) if t > last_seen]
        cadence.fetched(now_ns, last_seen, fresh)
        yield cadence, fresh, cadence.interval_ns
        last_seen = fresh[-1] if fresh else last_seen


def kept(stamps: list[int], size: int, dry: tuple[int, int] | None = None) -> list[int]:
    return [t for _, fresh, _ in fetches(stamps, size, dry) for t in fresh]


def test_the_h200_samples_are_200_ms_apart() -> None:
    stamps = h200_stamps_us(1)
    gaps = sorted(b - a for a, b in itertools.pairwise(stamps))
    assert len(stamps) >= 60
    assert 190_000 <= gaps[len(gaps) // 2] <= 210_000


def test_a_buffer_of_a_hundred_samples_loses_none_at_one_fetch_every_two_seconds() -> None:
    stamps = h200_stamps_us()
    runs = list(fetches(stamps, 100))
    assert kept(stamps, 100) == stamps
    cadence = runs[-1][0]
    assert cadence.interval_ns == nd.SAMPLES_INTERVAL_NS
    assert 190_000 <= (cadence.spacing_us or 0) <= 210_000
    # one fetch every 2 s over the run, not one a tick: what the cadence saves
    run_s = (stamps[-1] - stamps[0]) / 1e6
    assert len(runs) <= run_s / 2 + 2


@pytest.mark.parametrize("size", [3, 6, 9, 10])
def test_a_buffer_shorter_than_the_interval_is_found_out_and_fetched_often_enough(
    size: int,
) -> None:
    stamps = h200_stamps_us()
    runs = list(fetches(stamps, size))
    got = [t for _, fresh, _ in runs for t in fresh]
    lost = sorted(set(stamps) - set(got))
    assert got == sorted(set(got)) and set(got) <= set(stamps)
    # Samples are lost until the cadence sees the buffer overflow, never after its last change.
    intervals = [interval for _, _, interval in runs]
    last_change = max(i for i in range(1, len(runs)) if intervals[i] != intervals[i - 1])
    assert lost and lost[-1] <= runs[last_change][1][0]
    assert len(lost) < 0.05 * len(stamps)
    final = runs[-1][0]
    assert 100_000_000 <= final.interval_ns < nd.SAMPLES_INTERVAL_NS
    assert final.interval_ns * 1e-3 < size * (final.spacing_us or 0)  # it fits in the buffer


def test_an_idle_gpu_whose_buffer_ran_dry_keeps_the_long_interval() -> None:
    stamps = h200_stamps_us()
    dry = (stamps[0] + 5 * 10**6, stamps[0] + 15 * 10**6)  # 10 s without a sample, then work
    runs = list(fetches(stamps, 100, dry))
    assert [t for _, fresh, _ in runs for t in fresh] == [
        t for t in stamps if not dry[0] <= t < dry[1]
    ]
    assert all(interval == nd.SAMPLES_INTERVAL_NS for _, _, interval in runs)
