"""Several nodes' recordings read as one (recording/merged.py), on CONSTRUCTED recordings
(tests/analysis/constructed.py) whose clocks are known: each node's monotonic zero sits at a
chosen wall time, and its steps end when the other node's do. Real nodes: tests/distributed."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.constructed import GPU_OK_ENV, Run, device, ns
from gpuwhy.analysis import diagnose
from gpuwhy.recording import Recording
from gpuwhy.recording.merged import PID_STRIDE, MergedRecording
from gpuwhy.wire import PROCESS_EVENT

GiB = 2**30
WALL = 1_800_000_000.0  # the first node's wall time at its monotonic zero


def _node(
    path: Path, host: str, *, ahead_s: float, wall_error_s: float, util: int, cpu: float
) -> Recording:
    """A node whose monotonic clock reads `ahead_s` more than the first node's at every instant,
    and whose wall clock is off by `wall_error_s`; its 50 training steps end when every other
    node's do (ranks in lockstep), at the first node's times 2.1 s, 2.2 s..."""
    run = Run(path, duration_s=20, devices=[device(0)], environment=GPU_OK_ENV)
    run.writer.set_meta("start_wall_s", WALL - ahead_s + wall_error_s)
    run.writer.set_meta("hostname", host)
    run.event(0.1 + ahead_s, PROCESS_EVENT, "", pid=100, ppid=1, launcher="torchrun",
              rank=0 if host == "a" else 1, world_size=2, host=host)  # fmt: skip
    end = run.steps("train", 2 + ahead_s, 50, 0.08, wait_s=0.02, pid=100)
    run.phase("train", 2 + ahead_s, end)
    run.gpu(0, 2 + ahead_s, end, util_gpu_pct=util, job_memory_bytes=GiB)
    run.host(2 + ahead_s, end, job_cpu_pct=cpu, cpu_system_pct=50.0)
    return run.close()


def test_nodes_on_one_clock_with_their_gpus_and_pids_apart(tmp_path: Path) -> None:
    a = _node(tmp_path / "a.db", "a", ahead_s=0, wall_error_s=0, util=90, cpu=100.0)
    b = _node(tmp_path / "b.db", "b", ahead_s=3.0, wall_error_s=0, util=40, cpu=300.0)
    with MergedRecording([a, b]) as merged:
        first, second = merged.clocks
        assert first.offset_ns == 0 and first.common_steps == 50
        # b's clock reads 3 s more than a's: its times move 3 s back.
        assert second.wall_offset_ns == ns(-3.0) and second.offset_ns == ns(-3.0)
        assert second.correction_ns == 0 and second.residual_ns == 0 and second.common_steps == 50
        assert [(d.index, d.name.endswith("@ b")) for d in merged.devices] == [
            (0, False),
            (1, True),
        ]
        diagnosis = diagnose(merged)
    train = diagnosis.phases["train"]
    assert train.steps == 50 and train.process_steps == 100
    assert train.gpu_util_pct == pytest.approx({0: 90, 1: 40})
    assert train.time_s == pytest.approx(5.0)  # the nodes' steps overlap on the job's clock
    rows = diagnosis.ranks["train"]
    assert [(row.label, row.pid, row.host) for row in rows] == [
        ("rank 0", 100, "a"),
        ("rank 1", 100, "b"),
    ]
    assert diagnosis.meta["hostname"] == "a, b" and len(diagnosis.meta["nodes"]) == 2


def test_a_wall_clock_that_is_off_is_corrected_by_the_step_ends(tmp_path: Path) -> None:
    a = _node(tmp_path / "a.db", "a", ahead_s=0, wall_error_s=0, util=90, cpu=100.0)
    # b's wall clock reads 0.4 s late: the wall clocks alone would put it 0.4 s off.
    b = _node(tmp_path / "b.db", "b", ahead_s=3.0, wall_error_s=0.4, util=40, cpu=300.0)
    with MergedRecording([a, b]) as merged:
        second = merged.clocks[1]
        assert second.wall_offset_ns == ns(-2.6) and second.correction_ns == ns(0.4)
        assert second.offset_ns == ns(-3.0) and second.residual_ns == 0
        starts = [
            t
            for block in merged.span_columns()
            if block.phase == "train" and block.kind.name == "STEP"
            for t in block.start_ns[:1]
            if block.pid in (100, 100 + PID_STRIDE)
        ]
        assert min(starts) == ns(2.02) and max(starts) == ns(2.02)  # a's and b's first step


def test_the_nodes_host_figures_are_their_mean(tmp_path: Path) -> None:
    a = _node(tmp_path / "a.db", "a", ahead_s=0, wall_error_s=0, util=90, cpu=100.0)
    b = _node(tmp_path / "b.db", "b", ahead_s=0, wall_error_s=0, util=40, cpu=300.0)
    with MergedRecording([a, b]) as merged:
        (bucket,) = merged.host_segments([ns(2), ns(6)])
        assert bucket is not None and bucket.mean("job_cpu_pct") == pytest.approx(200.0)
        assert bucket.summary("job_cpu_pct").maximum == pytest.approx(300.0)  # type: ignore[union-attr]
        assert bucket.samples == a.host_summary(ns(2), ns(6)).samples * 2  # type: ignore[union-attr]
