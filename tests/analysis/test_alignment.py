"""GPU samples lined up with phases: streaming and stored-summary paths agree exactly, and so
do the host's CPU statistics per window."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from constructed import H100, Run, device
from reference_alignment import align

from gpuwhy.analysis.alignment import ACTIVE, RUN, align_summaries
from gpuwhy.analysis.hostwindows import host_window_stats
from gpuwhy.analysis.intervals import IntervalSet, union
from gpuwhy.analysis.phases import recording_phase_stats
from gpuwhy.recording import Recording
from support.synth import synthesize


def test_streaming_and_summaries_give_the_same_statistics(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=30, devices=[H100, device(1)])
    run.gpu(
        0,
        0,
        30,
        util_gpu_pct=40,
        memory_used_bytes=2**30,
        clock_event_reasons=0x5,
        sm_clock_mhz=1500,
        pcie_rx_kbps=1000,
        job_memory_bytes=2**29,
    )
    run.gpu(1, 10.05, 20.05, util_gpu_pct=90, sm_active_permille=700)
    run.util(0, 2.02, 28.02, 55)
    windows = {
        "train": [(1_000_000_000, 9_500_000_000), (12_250_000_000, 19_000_000_000)],
        "validation": [(9_500_000_000, 12_250_000_000)],
        "other": [(0, 1_000_000_000), (19_000_000_000, 30_000_000_000)],
        RUN: [(0, 30_000_000_000)],
    }
    windows[ACTIVE] = union(windows["train"] + windows["validation"])
    with run.close() as recording:
        streamed = align(windows, recording.gpu_samples(), recording.util_samples())
        summarised = align_summaries(windows, recording)
    assert streamed == summarised
    train0 = streamed["train"][0]
    assert train0.util_source == "driver buffer" and train0.util_mean_pct == pytest.approx(55)
    assert train0.reason_counts == {0x1: train0.samples, 0x4: train0.samples}
    assert streamed["validation"][1].sm_active_mean == pytest.approx(0.7)
    assert streamed[RUN][0].samples == 300


def _host_reference(samples: Any, windows: dict[str, list[tuple[int, int]]]) -> dict[str, Any]:
    """Every host sample tested against every window: the plain definition."""
    sums = {name: [0, 0.0, 0, 0.0, 0] for name in windows}
    sets = {name: IntervalSet(intervals) for name, intervals in windows.items()}
    for sample in samples:
        for name, window in sets.items():
            if sample.t_ns in window:
                acc = sums[name]
                acc[0] += 1
                if sample.job_cpu_pct is not None:
                    acc[1] += sample.job_cpu_pct
                    acc[2] += 1
                if sample.cpu_system_pct is not None:
                    acc[3] += sample.cpu_system_pct
                    acc[4] += 1
    return {
        name: (acc[0], acc[1] / acc[2] if acc[2] else None, acc[3] / acc[4] if acc[4] else None)
        for name, acc in sums.items()
        if acc[0]
    }


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic quarter hour on 3 GPUs (tests/support/synth: constructed data shaped like
    a training run, labelled so in its meta): epochs of train and validation phases."""
    path = tmp_path_factory.mktemp("synth") / "quarter.gpuwhy.db"
    synthesize(path, hours=0.25, gpus=3, seed=2)
    return path


def _phase_windows(recording: Any) -> dict[str, list[tuple[int, int]]]:
    start, end = recording.meta["start_ns"], recording.meta["end_ns"]
    phases = recording_phase_stats(recording, start, end)
    named = {n: list(p.intervals) for n, p in phases.items() if not p.is_pseudo}
    return {
        **named,
        "other": list(phases["other"].intervals),
        RUN: [(start, end)],
        ACTIVE: union(i for intervals in named.values() for i in intervals),
    }


def test_summaries_equal_streaming_for_many_phase_intervals(synthetic: Path) -> None:
    with Recording.open(synthetic) as recording:
        windows = _phase_windows(recording)
        assert sum(len(v) for v in windows.values()) > 20  # epochs: many boundaries
        streamed = align(windows, recording.gpu_samples(), recording.util_samples())
        assert align_summaries(windows, recording) == streamed
        assert streamed["validation"][0].util_source == "driver buffer"
        host = host_window_stats(windows, recording)
        want = _host_reference(recording.host_samples(), windows)
        assert set(host) == set(want)
        for name, (samples, job, system) in want.items():
            assert host[name].samples == samples
            assert host[name].job_cpu_mean_pct == pytest.approx(job, rel=1e-12)
            assert host[name].cpu_system_mean_pct == pytest.approx(system, rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_summaries_equal_streaming_for_random_windows(synthetic: Path, seed: int) -> None:
    rng = random.Random(seed)
    with Recording.open(synthetic) as recording:
        low, high = recording.time_range()
        windows: dict[str, list[tuple[int, int]]] = {}
        for name in ("a", "b", "c"):  # overlapping each other, some past the data's ends
            cuts = sorted(rng.randrange(low - 10**9, high + 10**9) for _ in range(24))
            windows[name] = list(zip(cuts[::2], cuts[1::2], strict=True))
        windows["empty"] = []
        streamed = align(windows, recording.gpu_samples(), recording.util_samples())
        assert align_summaries(windows, recording) == streamed
        assert streamed["empty"] == {}
