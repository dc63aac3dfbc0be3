"""Kernel-level findings on real H200 traces, held to their slow/fixed pairs.

The H200 capture (tests/data/gpu/2026-11-26-nvidia-h200, README beside it) profiled a window of
each PyTorch scenario's slow run and of its fixed run (`gpuwhy run --profile`: the same steps,
the same profiler settings). The truth is the ratio of the two windows' median step times, as
the issue that asks for trace findings sets it; the speed-up estimate, made on the slow trace
alone, must lie within 20 % of it, and the fixed trace must not get the same finding.
"""

from __future__ import annotations

import functools
import statistics

from gpuwhy.analysis.diagnose import Diagnosis
from gpuwhy.analysis.kernels.diagnosis import diagnose_traces
from gpuwhy.analysis.kernels.steps import RankFacts, rank_facts
from gpuwhy.model import Finding
from gpuwhy.traces import load_traces
from support import ROOT

CAPTURE = ROOT / "tests" / "data" / "gpu" / "2026-11-26-nvidia-h200"
TOLERANCE = 0.20


def _window(scenario: str, variant: str) -> str:
    return str(CAPTURE / scenario / f"window-{variant}.gpuwhy.profile")


@functools.cache
def diagnosed(scenario: str, variant: str) -> Diagnosis:
    return diagnose_traces(load_traces(_window(scenario, variant)))


@functools.cache
def facts(scenario: str, variant: str) -> RankFacts:
    (trace,) = load_traces(_window(scenario, variant))
    return rank_facts(trace)


def step_ms(scenario: str, variant: str) -> float:
    return statistics.median(s.time_ns for s in facts(scenario, variant).steps) / 1e6


def found(diagnosis: Diagnosis, code: str) -> Finding | None:
    return next((f for f in diagnosis.findings if f.code == code), None)


def test_the_input_bound_loader_estimate_matches_the_fixed_trace() -> None:
    """DataLoader with num_workers=0 and a slow __getitem__, against 8 workers and pinned
    memory: the exposed loader wait removed predicts the fixed trace's step."""
    slow = found(diagnosed("torch_loader", "slow"), "INPUT_BOUND")
    assert slow is not None and slow.speedup is not None
    truth = step_ms("torch_loader", "slow") / step_ms("torch_loader", "fixed")
    assert abs(slow.speedup / truth - 1) <= TOLERANCE, (slow.speedup, truth)
    assert slow.evidence["data_wait_fraction"] >= 0.8
    assert found(diagnosed("torch_loader", "fixed"), "INPUT_BOUND") is None


def test_tiny_kernels_issued_one_by_one_are_launch_bound() -> None:
    """Batches of 32 through a small MLP: ~35 kernels of ~2 us a step, each issued by eager
    PyTorch after the last one ended. The launch calls themselves are a small part of the wait
    (Python and dispatch are the rest), so their share alone would call it HOST_BOUND."""
    diagnosis = diagnosed("tiny_batch", "slow")
    launch = found(diagnosis, "LAUNCH_BOUND")
    assert launch is not None, [f.code for f in diagnosis.findings]
    assert found(diagnosis, "HOST_BOUND") is None
    evidence = launch.evidence
    assert evidence["kernel_median_us"] < evidence["launch_call_mean_us"]
    assert evidence["short_gap_share_of_wait"] >= 0.5
    assert evidence["launch_call_share_of_wait"] < 0.5
    assert evidence["host_wait_fraction"] >= 0.8  # measured: the GPU busy 5-10 % of the step
    steps = facts("tiny_batch", "slow").steps
    assert all(s.host_wait_short_ns == s.host_wait_ns for s in steps)  # no gap of 1 ms or more


def test_the_loaders_wait_is_one_long_gap_not_launch_overhead() -> None:
    """The same job's slow input: the device's wait for the host sits in the loader's long gap,
    which INPUT_BOUND names; no launch finding on top of it."""
    diagnosis = diagnosed("torch_loader", "slow")
    assert found(diagnosis, "LAUNCH_BOUND") is None
    steps = facts("torch_loader", "slow").steps
    short = sum(s.host_wait_short_ns for s in steps) / sum(s.host_wait_ns for s in steps)
    assert short < 0.2, short


def test_syncs_the_trace_shows_costing_little_get_no_sync_finding() -> None:
    """Two .item() syncs a step: under the profiler the host is slower than the device anyway,
    so the device has nothing queued to drain and the sync's idle is small. The pair agrees:
    the fixed window's step is within 15 % of the slow one's, and neither gets SYNC_BOUND."""
    ratio = step_ms("item_sync", "slow") / step_ms("item_sync", "fixed")
    assert ratio < 1.15, ratio
    for variant in ("slow", "fixed"):
        assert found(diagnosed("item_sync", variant), "SYNC_BOUND") is None
    syncs = {c.name for c in facts("item_sync", "slow").trace.syncs}
    assert "cudaStreamSynchronize" in syncs  # seen and timed, only cheap


def _profile(scenario: str) -> Diagnosis:
    """The scenario's own profiled run (torch.profiler in the job, not gpuwhy's window)."""
    return diagnose_traces(load_traces(str(CAPTURE / scenario / "profile.trace.json.gz")))


def test_a_model_left_on_the_cpu_beside_an_h200_is_not_on_gpu() -> None:
    """The cpu_model scenario kept its model and batches on the CPU of a machine with an H200:
    the trace lists the GPU and holds no device work; the heaviest operators are the model's
    matrix products. The recording of the same scenario got the same code from NVML."""
    diagnosis = _profile("cpu_model")
    (finding,) = diagnosis.findings  # nothing else: the GPU idles because nothing runs on it
    assert finding.code == "NOT_ON_GPU" and finding.severity.value == "error"
    evidence = finding.evidence
    assert evidence["gpus"] == {"0": "NVIDIA H200"}
    assert evidence["gpu_busy"] == 0 and evidence["kernels_per_step"] == 0
    assert evidence["steps"] == 6
    assert any("mm" in name for name in evidence["cpu_ops_ms"])  # matmuls ran on the CPU
    assert "model.to(device)" in finding.fix
    recorded = (CAPTURE / "cpu_model" / "profiled.report.json").read_text()
    assert '"NOT_ON_GPU"' in recorded


def test_every_job_that_ran_on_the_gpu_is_on_it() -> None:
    for scenario in ("healthy", "torch_loader", "tiny_batch", "item_sync"):
        assert found(_profile(scenario), "NOT_ON_GPU") is None, scenario
        for variant in ("slow", "fixed"):
            if scenario != "healthy":
                assert found(diagnosed(scenario, variant), "NOT_ON_GPU") is None, scenario
