"""gpuwhy on a real GPU: the H200 capture (tests/data/gpu/2026-11-26-nvidia-h200; its README says
how it was made) replayed through today's analysis, each finding checked against the truth the
scenario jobs measured themselves (`*.truth.json`: their own phase timers, never gpuwhy's).

A speed-up is checked as the seconds it says the fix saves: the whole run's start-up (Python,
torch, CUDA: 7–10 s, and ±2 s between runs) is the same with and without the fix and would drown
a ratio of whole runs, while the seconds the fix took out of the train phase are what the jobs
timed. Estimate: run − run / speed-up. Truth: the slow run's train phase less that of the fixed
run of its pair (the two ran back to back).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuwhy.recording import Recording
from support import ROOT
from support.gpu_capture import TOLERANCE, Capture, codes, finding, warnings

sys.path.insert(0, str(ROOT / "bench"))
import gpu_replay

H200 = Capture("2026-11-26-nvidia-h200")
CAPTURE = H200.folder
diagnosed, truth, runs = H200.diagnosed, H200.truth, H200.runs
train_s, saved_by_fix = H200.train_s, H200.saved_by_fix


def test_every_recording_is_of_the_h200_with_the_job_on_it() -> None:
    assert H200.recordings_of("NVIDIA H200", (9, 0)) >= 50


@pytest.mark.parametrize("run", ["slow-0", "slow-1", "slow-2", "fixed-0", "fixed-1", "fixed-2"])
def test_healthy_control_is_gpu_bound_and_nothing_else(run: str) -> None:
    diagnosis = diagnosed("healthy", run)
    train = diagnosis.phases["train"]
    assert train.steps == truth("healthy", run)["steps"] + 4  # jobkit's 4 warm-up steps
    assert train.gpu_util_pct is not None and train.gpu_util_pct[0] >= 90
    assert train.sm_active is not None and train.sm_active[0] >= 0.8  # GPM on Hopper
    assert warnings(diagnosis) == [] and codes(diagnosis) == ["GPU_BOUND"]


def test_input_bound_dataloader_its_wait_and_its_saving() -> None:
    for run in runs("torch_loader", "slow"):
        diagnosis = diagnosed("torch_loader", run)
        # The model is on the GPU: a 1 % busy GPU whose SMs were active is not NOT_ON_GPU.
        assert codes(diagnosis)[0] == "INPUT_BOUND" and "NOT_ON_GPU" not in codes(diagnosis)
        found = finding(diagnosis, "INPUT_BOUND")
        # The share of the train phase the fix removed bounds the wait from below: the fix
        # (8 workers) still leaves some of the phase to its loader.
        removed = 1 - train_s("torch_loader", run.replace("slow", "fixed")) / train_s(
            "torch_loader", run
        )
        assert removed <= found.evidence["data_wait_fraction"] <= removed + 0.1
        saved = saved_by_fix("torch_loader", run)
        assert gpu_replay.saved_estimate(diagnosis, found) == pytest.approx(saved, rel=TOLERANCE)
    for run in runs("torch_loader", "fixed"):
        assert "INPUT_BOUND" not in codes(diagnosed("torch_loader", run))


def test_tiny_batches_are_host_bound_with_the_input_unmeasured() -> None:
    for run in runs("tiny_batch", "slow"):
        diagnosis = diagnosed("tiny_batch", run)
        assert codes(diagnosis) == ["HOST_BOUND"]
        found = finding(diagnosis, "HOST_BOUND")
        assert found.evidence["data_wait_measured"] is False
        assert "not measured" in found.title and "DataLoader workers" in found.fix
        assert "gpuwhy.iterate(batches)" in found.fix  # how to time it
        saved = saved_by_fix("tiny_batch", run)
        assert gpu_replay.saved_estimate(diagnosis, found) == pytest.approx(saved, rel=TOLERANCE)
    for run in runs("tiny_batch", "fixed"):
        assert warnings(diagnosed("tiny_batch", run)) == []


def test_syncs_every_step_are_counted_and_named_where_the_gpu_idles() -> None:
    for run in runs("item_sync", "slow") + runs("item_sync", "fixed"):
        with Recording.open(CAPTURE / "item_sync" / f"{run}.gpuwhy.db") as recording:
            synced = sum(e.data["count"] for e in recording.events() if e.kind == "sync")
        expected = truth("item_sync", run)["syncs_per_step"] * truth("item_sync", run)["steps"]
        # Two per step (.item(), .cpu()); the fixed loop reads its total once at the end.
        assert expected <= synced <= expected + 2
    per_pair = [saved_by_fix("item_sync", run) for run in runs("item_sync", "slow")]
    named = 0
    for run in runs("item_sync", "slow"):
        diagnosis = diagnosed("item_sync", run)
        util = diagnosis.phases["train"].gpu_util_pct[0]  # type: ignore[index]
        if util >= 80:  # as busy as healthy jobs get: no finding owes its speed-up
            assert "SYNC_BOUND" not in codes(diagnosis)
            continue
        named += 1
        found = finding(diagnosis, "SYNC_BOUND")
        assert found.evidence["syncs_per_step"] == pytest.approx(2.0, abs=0.01)
        # Two pairs of short phases: the truth itself varies 3-fold between pairs.
        estimate = gpu_replay.saved_estimate(diagnosis, found)
        assert min(per_pair) * (1 - TOLERANCE) <= estimate <= max(per_pair) * (1 + TOLERANCE)
    assert named >= 1
    for run in runs("item_sync", "fixed"):
        assert "SYNC_BOUND" not in codes(diagnosed("item_sync", run))


def test_model_left_on_the_cpu_is_not_on_gpu_alone() -> None:
    for run in runs("cpu_model", "slow"):
        assert truth("cpu_model", run)["model_device"] == "cpu"
        assert codes(diagnosed("cpu_model", run)) == ["NOT_ON_GPU"]
    for run in runs("cpu_model", "fixed"):
        assert "NOT_ON_GPU" not in codes(diagnosed("cpu_model", run))


def test_two_processes_of_the_job_on_one_gpu_are_both_the_job() -> None:
    for run in runs("two_procs", "slow"):
        diagnosis = diagnosed("two_procs", run)
        assert len(truth("two_procs", run)["children"]) == 2
        (device,) = diagnosis.devices
        assert device.job_share is not None and device.job_share >= 0.8
        assert warnings(diagnosis) == []


def test_memory_held_while_idle_is_the_jobs() -> None:
    for run in runs("alloc_idle", "slow"):
        held = truth("alloc_idle", run)["reserved_during_idle_bytes"]
        (device,) = diagnosed("alloc_idle", run).devices
        # NVML counts the CUDA context's own memory (~0.5 GiB) beside what torch reserved.
        assert held <= (device.job_memory_max_bytes or 0) <= held + 2**30


def test_doctor_on_the_h200_facts_says_both_frameworks_use_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "doctor", "--from", str(CAPTURE / "extras/doctor.json")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "No problems found" in done.stdout
    assert "PyTorch 2.11.0+cu130: will use 1 GPU (NVIDIA H200)" in done.stdout
    assert "JAX 0.11.2: will use 1 GPU (NVIDIA H200)" in done.stdout
