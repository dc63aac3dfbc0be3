"""GPU samples lined up with phases: streaming and stored-summary paths agree exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
from constructed import H100, Run, device

from gpuwhy.analysis.alignment import ACTIVE, RUN, align, align_summaries
from gpuwhy.analysis.intervals import union


def test_streaming_and_summaries_give_the_same_statistics(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=30, devices=[H100, device(1)])
    run.gpu(0, 0, 30, util_gpu_pct=40, memory_used_bytes=2**30, clock_event_reasons=0x5,
            sm_clock_mhz=1500, pcie_rx_kbps=1000, job_memory_bytes=2**29)
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
