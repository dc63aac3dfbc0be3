"""Per-rank figures, STRAGGLER and IDLE_ALLOCATED on CONSTRUCTED recordings (constructed.py):
several processes' spans and their process events, through the real writer, reader and
diagnosis. The same figures on real `torchrun` jobs: tests/distributed/."""

from __future__ import annotations

from pathlib import Path

import pytest
from constructed import GPU_OK_ENV, Run, device

from gpuwhy.analysis import Diagnosis, diagnose
from gpuwhy.analysis.rules.straggler import LAG_FRACTION, MIN_STEPS
from gpuwhy.telemetry.nvml import GPU_PROCESS_EVENT
from gpuwhy.wire import PROCESS_EVENT

GiB = 2**30
AGENT = 900  # the launcher's own process: it connects (it imports torch) but never steps


def _diagnose(run: Run) -> Diagnosis:
    with run.close() as recording:
        return diagnose(recording)


def _ddp(
    run: Run,
    waits: list[float],
    *,
    compute_s: float = 0.010,
    steps: int = 60,
    named: bool = True,
) -> float:
    """Ranks in lockstep, as synchronous data parallelism makes them: each step, every rank
    waits for its own input, then computes; the all-reduce ends when the slowest rank's input
    and compute are done, so each rank's step runs until then."""
    cycle = max(waits) + compute_s
    run.event(0.1, PROCESS_EVENT, "process connected", pid=AGENT, ppid=1)
    for rank, wait in enumerate(waits):
        pid = 1000 + rank
        identity = {"launcher": "torchrun", "rank": rank, "world_size": len(waits)}
        run.event(0.2, PROCESS_EVENT, "process connected", pid=pid, ppid=AGENT,
                  **(identity if named else {}), host="node-a")  # fmt: skip
        run.event(0.3, PROCESS_EVENT, "process connected", pid=pid + 500, ppid=pid)  # a worker
        run.steps("train", 1.0, steps, cycle - wait, wait_s=wait, pid=pid)
    end = 1.0 + steps * cycle
    run.phase("train", 1.0, end)
    return end


def test_each_rank_gets_its_own_row_by_rank(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=5)
    _ddp(run, [0.002, 0.002, 0.030, 0.002])
    run.event(2, "sync", "syncs", phase="train", count=60, steps=60, pid=1001)
    diagnosis = _diagnose(run)
    rows = diagnosis.ranks["train"]
    assert [row.label for row in rows] == ["rank 0", "rank 1", "rank 2", "rank 3"]
    assert all(row.steps == 60 and row.host == "node-a" for row in rows)
    assert rows[2].wait_per_step_s == pytest.approx(0.030)
    assert rows[0].wait_per_step_s == pytest.approx(0.002)
    assert rows[2].cycle_s == pytest.approx(0.040) and rows[0].cycle_s == pytest.approx(0.040)
    assert rows[1].syncs_per_step == pytest.approx(1.0) and rows[0].syncs_per_step is None
    # The phase counts a rank's steps, not every rank's; its wait is the slowest rank's.
    train = diagnosis.phases["train"]
    assert train.steps == 60 and train.process_steps == 240
    assert train.data_wait_fraction == pytest.approx(0.030 / 0.040)


def test_a_rank_with_a_slow_input_is_the_straggler(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=5)
    end = _ddp(run, [0.002, 0.002, 0.030, 0.004])
    diagnosis = _diagnose(run)
    (finding,) = [f for f in diagnosis.findings if f.code == "STRAGGLER"]
    evidence = finding.evidence
    assert evidence["rank"] == 2 and evidence["host"] == "node-a" and evidence["pid"] == 1002
    # The others' median wait is 2 ms: they wait 28 ms of each 40 ms step for rank 2.
    assert evidence["others_wait_per_step_s"] == pytest.approx(0.028)
    assert evidence["lag_fraction"] == pytest.approx(0.7)
    assert evidence["phase_speedup"] == pytest.approx(0.040 / 0.012, rel=1e-3)
    saved = 0.028 * 60
    assert finding.speedup == pytest.approx(5 / (5 - saved), rel=1e-3)
    assert "rank 2" in finding.title and "the other 3 ranks wait 28.0 ms" in finding.title
    # A lower bound: what arriving late costs the collectives shows in no wait.
    assert finding.speedup_method.endswith("so the gain can be larger")
    assert end < 5


def test_balanced_ranks_have_no_straggler(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=5)
    _ddp(run, [0.010, 0.011, 0.010, 0.012])
    assert "STRAGGLER" not in [f.code for f in _diagnose(run).findings]


def test_a_lag_under_the_threshold_or_too_few_steps_is_no_straggler(tmp_path: Path) -> None:
    just_under = 0.040 * LAG_FRACTION * 0.9
    run = Run(tmp_path / "a.db", duration_s=5)
    _ddp(run, [0.002, 0.002 + just_under], compute_s=0.040 - 0.002 - just_under)
    assert "STRAGGLER" not in [f.code for f in _diagnose(run).findings]
    few = Run(tmp_path / "b.db", duration_s=5)
    _ddp(few, [0.002, 0.030], steps=MIN_STEPS - 1)
    assert "STRAGGLER" not in [f.code for f in _diagnose(few).findings]


def test_processes_without_a_launcher_are_named_by_pid(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=5)
    _ddp(run, [0.002, 0.030], named=False)
    diagnosis = _diagnose(run)
    assert [row.label for row in diagnosis.ranks["train"]] == ["pid 1000", "pid 1001"]
    (finding,) = [f for f in diagnosis.findings if f.code == "STRAGGLER"]
    assert finding.evidence["rank"] is None and finding.evidence["pid"] == 1001
    assert "pid 1001" in finding.title and "pid 1000 waits" in finding.title


def test_one_process_makes_no_rank_table(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=5)
    run.steps("train", 1.0, 40, 0.02, wait_s=0.01, pid=7)
    run.phase("train", 1.0, 2.2)
    assert _diagnose(run).ranks == {}


def test_syncs_per_step_count_every_ranks_steps(tmp_path: Path) -> None:
    """Two ranks each sync 0.6 times a step: 0.6 per step, not the 1.2 that one rank's step
    count would make of both ranks' syncs (SYNC_BOUND starts at 1 a step)."""
    run = Run(tmp_path / "r.db", duration_s=5, devices=[device(0)], environment=GPU_OK_ENV)
    end = _ddp(run, [0.0, 0.0], compute_s=0.05, steps=50)
    run.gpu(0, 1, end, util_gpu_pct=30, job_memory_bytes=GiB)
    for pid in (1000, 1001):
        run.event(2, "sync", "syncs", phase="train", count=30, steps=30, pid=pid)
    codes = [f.code for f in _diagnose(run).findings]
    assert "HOST_BOUND" in codes and "SYNC_BOUND" not in codes


def test_pageable_copies_are_each_ranks_own_time(tmp_path: Path) -> None:
    """Four ranks each blocked 1.2 s of a 3 s phase in pageable copies: 40 % of the phase, not
    the 160 % their sum would make of it (capped at all of it), and 1.2 s saved, not 4.8."""
    run = Run(tmp_path / "r.db", duration_s=5, devices=[device(0)], environment=GPU_OK_ENV)
    end = _ddp(run, [0.0] * 4, compute_s=0.05, steps=60)
    run.gpu(0, 1, end, util_gpu_pct=20, job_memory_bytes=GiB)
    for pid in range(1000, 1004):
        run.event(2, "pageable_copy", "", phase="train", count=60, ns=1_200_000_000,
                  bytes=6 * 10**9, pid=pid)  # fmt: skip
    found = next(f for f in _diagnose(run).findings if f.code == "PAGEABLE_COPY")
    assert found.evidence["pageable_copy_fraction"] == pytest.approx(0.4, abs=0.01)
    assert found.evidence["copies"] == 60 and found.evidence["copied_bytes"] == 6 * 10**9
    link = 32 * 16e9 * 128 / 130 / 8  # device(0): PCIe gen5 x16
    assert found.evidence["saved_s"] == pytest.approx(1.2 - 6e9 / link, abs=0.01)


def test_ranks_join_their_gpus_by_what_nvml_saw(tmp_path: Path) -> None:
    devices = [device(0), device(1)]
    run = Run(tmp_path / "r.db", duration_s=5, devices=devices, environment=GPU_OK_ENV)
    end = _ddp(run, [0.002, 0.002])
    # Rank 0 chose GPU 1 and rank 1 GPU 0: the rows follow NVML, not the ranks' numbers.
    run.event(1.5, GPU_PROCESS_EVENT, "", pid=1001, device=0, uuid="GPU-constructed-0",
              memory_bytes=4 * GiB)  # fmt: skip
    # Rank 1 also opened a stray context on GPU 1 (a CUDA call before set_device): its own GPU
    # is where its model's memory is.
    run.event(1.4, GPU_PROCESS_EVENT, "", pid=1001, device=1, uuid="GPU-constructed-1",
              memory_bytes=500 * 2**20)  # fmt: skip
    run.event(1.5, GPU_PROCESS_EVENT, "", pid=1000, device=1, uuid="GPU-constructed-1",
              memory_bytes=4 * GiB)  # fmt: skip
    run.gpu(0, 1, end, util_gpu_pct=70, job_memory_bytes=GiB)
    run.gpu(1, 1, end, util_gpu_pct=50, job_memory_bytes=GiB)
    rows = _diagnose(run).ranks["train"]
    assert (rows[0].device, rows[0].gpu_uuid, rows[0].gpu_util_pct) == (
        1,
        "GPU-constructed-1",
        pytest.approx(50),
    )
    assert (rows[1].device, rows[1].gpu_util_pct) == (0, pytest.approx(70))


def test_memory_held_on_a_gpu_that_never_works_is_idle_allocated(tmp_path: Path) -> None:
    """TensorFlow's default: memory mapped on every visible GPU, the model on the first."""
    devices = [device(i) for i in range(3)]
    run = Run(tmp_path / "r.db", duration_s=10, devices=devices, environment=GPU_OK_ENV)
    end = run.steps("train", 1.0, 100, 0.08)
    run.phase("train", 1.0, end)
    run.event(0.5, "hook", "keras integration", framework="keras", backend="tensorflow")
    run.gpu(0, 1, end, util_gpu_pct=85, job_memory_bytes=20 * GiB)
    run.gpu(1, 1, end, util_gpu_pct=0, job_memory_bytes=GiB // 2)
    run.gpu(2, 1, end, util_gpu_pct=0, job_memory_bytes=GiB // 2)
    diagnosis = _diagnose(run)
    codes = [f.code for f in diagnosis.findings]
    (finding,) = [f for f in diagnosis.findings if f.code == "IDLE_ALLOCATED"]
    assert finding.evidence["idle_gpus"] == [1, 2] and finding.evidence["working_gpus"] == [0]
    assert finding.evidence["idle_gpu_job_memory_bytes"] == {"1": GiB // 2, "2": GiB // 2}
    assert "MirroredStrategy" in finding.fix and "set_visible_devices" in finding.fix
    # One cause, said once: the idle GPUs the job holds are not also an imbalance, nor unused.
    assert "GPU_IMBALANCE" not in codes and "IDLE_GPUS" not in codes
    # Every held GPU working: nothing to say.
    busy = Run(tmp_path / "b.db", duration_s=10, devices=devices[:2], environment=GPU_OK_ENV)
    end = busy.steps("train", 1.0, 100, 0.08)
    busy.phase("train", 1.0, end)
    busy.gpu(0, 1, end, util_gpu_pct=85, job_memory_bytes=GiB)
    busy.gpu(1, 1, end, util_gpu_pct=80, job_memory_bytes=GiB)
    assert "IDLE_ALLOCATED" not in [f.code for f in _diagnose(busy).findings]
