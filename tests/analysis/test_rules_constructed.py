"""Every runtime rule on CONSTRUCTED recordings (see constructed.py): GPU samples written by hand
through the real RecordingWriter, read back through the real reader, diagnosed end to end.

These stand in for real GPU recordings until a GPU machine captures them (tests/data/recordings/).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from constructed import GPU_OK_ENV, H100, NO_GPU_ENV, Run, device

from gpuwhy.analysis import Diagnosis, diagnose
from gpuwhy.model import Severity

GiB = 2**30


def _diagnose(run: Run) -> Diagnosis:
    with run.close() as recording:
        return diagnose(recording)


def _codes(diagnosis: Diagnosis) -> list[str]:
    return [f.code for f in diagnosis.findings]


def _train(
    run: Run,
    *,
    wait_s: float = 0.0,
    step_s: float = 0.05,
    start: float = 1.0,
    count: int = 100,
    **kwargs: float,
) -> float:
    end = run.steps("train", start, count, step_s, wait_s=wait_s, **kwargs)  # type: ignore[arg-type]
    run.phase("train", start, end)
    return end


def test_input_starved_gpu_is_input_bound_with_the_tfdata_fix(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=12, devices=[H100], environment=GPU_OK_ENV)
    end = _train(run, wait_s=0.06, step_s=0.04)  # 1 .. 11 s, 60 % waiting
    run.gpu(0, 0, 1, util_gpu_pct=0, job_memory_bytes=GiB)
    run.gpu(0, 1, end, util_gpu_pct=35, job_memory_bytes=4 * GiB)
    run.gpu(0, end, 12, util_gpu_pct=0, job_memory_bytes=GiB)
    run.event(0.5, "hook", "keras integration", framework="keras", backend="tensorflow")
    diagnosis = _diagnose(run)
    top = diagnosis.findings[0]
    assert top.code == "INPUT_BOUND" and top.severity is Severity.WARNING
    assert top.evidence["data_wait_fraction"] == pytest.approx(0.6)
    assert top.speedup == pytest.approx(12 / (12 - 6), rel=1e-3)
    assert "num_parallel_calls=tf.data.AUTOTUNE" in top.fix
    assert diagnosis.framework == "keras-tensorflow"
    assert "HOST_BOUND" not in _codes(diagnosis)  # the GPU waits for data, not for the host


def _input_bound_phases(diagnosis: Diagnosis) -> list[str]:
    return [f.evidence["phase"] for f in diagnosis.findings if f.code == "INPUT_BOUND"]


def test_a_two_step_phase_waiting_on_its_start_up_is_not_input_bound(tmp_path: Path) -> None:
    """An evaluation of two batches whose first one waits 0.3 s for the loader to start: 90 %
    of the phase is wait, but 1.5 % of the run, and two steps cannot tell one-time start-up
    from a slow pipeline. Train's 40 % wait stays a finding."""
    run = Run(tmp_path / "r.db", duration_s=20, environment=NO_GPU_ENV)
    end = _train(run, wait_s=0.04, step_s=0.06, count=150)  # 1 .. 16 s
    start = end + 0.5
    run.steps("validation", start, 1, 0.01, wait_s=0.3)
    run.steps("validation", start + 0.31, 1, 0.01)
    run.phase("validation", start, start + 0.32)
    diagnosis = _diagnose(run)
    assert diagnosis.phases["validation"].data_wait_fraction >= 0.9  # type: ignore[operator]
    assert _input_bound_phases(diagnosis) == ["train"]


def test_a_two_step_phase_whose_wait_costs_the_run_is_input_bound(tmp_path: Path) -> None:
    """The same two steps waiting 2 s: now 10 % of the run, worth a finding."""
    run = Run(tmp_path / "r.db", duration_s=20, environment=NO_GPU_ENV)
    end = _train(run, step_s=0.1, count=100)  # 1 .. 11 s, no wait
    start = end + 0.5
    run.steps("validation", start, 2, 0.01, wait_s=1.0)
    run.phase("validation", start, start + 2.02)
    assert _input_bound_phases(_diagnose(run)) == ["validation"]


def test_gpu_busy_in_validation_idle_in_training(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=12, devices=[H100], environment=GPU_OK_ENV)
    end = _train(run, wait_s=0.07, step_s=0.03, start=1.0)  # 1 .. 11
    run.phase("validation", end, 12)
    run.steps("validation", end, 10, 0.1)
    run.gpu(0, 1, end, util_gpu_pct=12, job_memory_bytes=GiB)
    run.gpu(0, end, 12, util_gpu_pct=92, job_memory_bytes=GiB)
    diagnosis = _diagnose(run)
    gap = next(f for f in diagnosis.findings if f.code == "PHASE_GPU_GAP")
    assert gap.evidence["busy_phase"] == "validation" and gap.evidence["idle_phase"] == "train"
    assert "waits for input" in gap.title
    assert _codes(diagnosis)[0] in ("INPUT_BOUND", "PHASE_GPU_GAP")


def test_host_bound_when_gpu_idles_without_data_wait(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV)
    end = _train(run, step_s=0.08)
    run.gpu(0, 1, end, util_gpu_pct=30, job_memory_bytes=GiB)
    run.event(0.1, "hook", "torch DataLoader", framework="torch")
    diagnosis = _diagnose(run)
    assert _codes(diagnosis) == ["HOST_BOUND"]
    finding = diagnosis.findings[0]
    assert "torch.compile" in finding.fix
    # 8 s of training at 30 % busy, shortened to 80 % busy: 8 * 0.3/0.8 = 3 s, saves 5 s of 10.
    assert finding.speedup == pytest.approx(2.0, rel=1e-3)


def test_sync_events_every_step_make_it_sync_bound(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV)
    end = _train(run, step_s=0.08)
    run.gpu(0, 1, end, util_gpu_pct=30, job_memory_bytes=GiB)
    run.event(5, "sync", ".item() per step", phase="train", count=100)
    run.event(0.1, "hook", "torch", framework="torch")
    diagnosis = _diagnose(run)
    assert _codes(diagnosis) == ["SYNC_BOUND"]
    assert ".item()" in diagnosis.findings[0].fix


def test_syncs_on_most_steps_are_sync_bound_with_the_keras_torch_fix(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV)
    end = _train(run, step_s=0.08)  # 100 steps
    run.gpu(0, 1, end, util_gpu_pct=30, job_memory_bytes=GiB)
    # As the hooks send them: one event per phase every few seconds, steps that synced included.
    run.event(4, "sync", "device-to-host synchronisations", phase="train", count=90, steps=45)
    run.event(8, "sync", "device-to-host synchronisations", phase="train", count=80, steps=40)
    run.event(0.1, "hooks", "Keras loop ran", framework="keras", backend="torch")
    diagnosis = _diagnose(run)
    assert _codes(diagnosis) == ["SYNC_BOUND"]
    finding = diagnosis.findings[0]
    assert finding.evidence["syncs_per_step"] == pytest.approx(1.7)
    assert finding.evidence["synced_step_fraction"] == pytest.approx(0.85)
    assert "async_safe" in finding.fix


def test_syncs_crowded_into_a_few_steps_stay_host_bound(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV)
    end = _train(run, step_s=0.08)  # 100 steps
    run.gpu(0, 1, end, util_gpu_pct=30, job_memory_bytes=GiB)
    # 150 reads, but in 5 steps (a metric pass every 20 steps): not a sync on every step
    run.event(8, "sync", "device-to-host synchronisations", phase="train", count=150, steps=5)
    run.event(0.1, "hook", "torch", framework="torch")
    assert _codes(_diagnose(run)) == ["HOST_BOUND"]


def test_model_left_on_cpu_is_not_on_gpu(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV)
    end = _train(run, step_s=0.08)
    run.gpu(0, 0, 10, util_gpu_pct=0, job_memory_bytes=0)
    run.event(0.1, "hook", "torch", framework="torch")
    diagnosis = _diagnose(run)
    assert _codes(diagnosis)[0] == "NOT_ON_GPU"
    assert diagnosis.findings[0].severity is Severity.ERROR
    assert "model.to(device)" in diagnosis.findings[0].fix
    assert end < 10


def test_not_on_gpu_defers_to_an_environment_error(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=10, devices=[H100], environment=NO_GPU_ENV)
    _train(run, step_s=0.08)
    run.gpu(0, 0, 10, util_gpu_pct=0, job_memory_bytes=0)
    diagnosis = _diagnose(run)
    assert "NOT_ON_GPU" not in _codes(diagnosis)
    assert [f.code for f in diagnosis.environment_findings] == ["NO_DRIVER"]


def test_idle_gpus_and_imbalance_on_a_multi_gpu_machine(tmp_path: Path) -> None:
    devices = [device(i) for i in range(4)]
    run = Run(tmp_path / "r.db", duration_s=10, devices=devices, environment=GPU_OK_ENV)
    end = _train(run, step_s=0.08)
    run.gpu(0, 1, end, util_gpu_pct=90, job_memory_bytes=GiB)
    run.gpu(1, 1, end, util_gpu_pct=45, job_memory_bytes=GiB)
    run.gpu(2, 1, end, util_gpu_pct=0, job_memory_bytes=0)
    run.gpu(3, 1, end, util_gpu_pct=0, job_memory_bytes=0)
    diagnosis = _diagnose(run)
    idle = next(f for f in diagnosis.findings if f.code == "IDLE_GPUS")
    assert idle.evidence["idle_gpus"] == [2, 3] and idle.evidence["used_gpus"] == [0, 1]
    imbalance = next(f for f in diagnosis.findings if f.code == "GPU_IMBALANCE")
    assert imbalance.evidence["spread_fraction"] == pytest.approx(0.5)
    assert "upper bound" in (idle.speedup_method or "")


def test_transfer_bound_is_judged_against_the_links_own_bandwidth(tmp_path: Path) -> None:
    gen3 = device(0, pcie_gen_max=3, pcie_width_max=16)  # 15.75 GB/s per direction
    run = Run(tmp_path / "r.db", duration_s=10, devices=[gen3], environment=GPU_OK_ENV)
    end = _train(run, step_s=0.08)
    run.gpu(0, 1, end, util_gpu_pct=40, job_memory_bytes=GiB, pcie_rx_kbps=6_300_000)
    diagnosis = _diagnose(run)
    transfer = next(f for f in diagnosis.findings if f.code == "TRANSFER_BOUND")
    assert transfer.evidence["link"] == "gen3 x16"
    assert transfer.evidence["link_busy_fraction"] == pytest.approx(0.4, abs=0.01)
    # The same traffic on the gen5 x16 link of an H100 is 10 %: no finding.
    run5 = Run(tmp_path / "r5.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV)
    end = _train(run5, step_s=0.08)
    run5.gpu(0, 1, end, util_gpu_pct=40, job_memory_bytes=GiB, pcie_rx_kbps=6_300_000)
    assert "TRANSFER_BOUND" not in _codes(_diagnose(run5))


def test_throttling_reasons_exclude_gpu_idle(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV)
    end = _train(run, step_s=0.08)
    run.gpu(
        0,
        1,
        end,
        util_gpu_pct=95,
        job_memory_bytes=GiB,
        sm_clock_mhz=1386,
        clock_event_reasons=0x40,
    )  # HwThermalSlowdown
    throttled = next(f for f in _diagnose(run).findings if f.code == "THROTTLED")
    assert throttled.severity is Severity.WARNING
    assert throttled.evidence["clock_drop_fraction"] == pytest.approx(0.3)
    idle = Run(tmp_path / "i.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV)
    end = _train(idle, step_s=0.08)
    idle.gpu(
        0, 1, end, util_gpu_pct=95, job_memory_bytes=GiB, sm_clock_mhz=900, clock_event_reasons=0x1
    )  # GpuIdle only
    assert "THROTTLED" not in _codes(_diagnose(idle))


def test_memory_pressure_for_torch_but_not_for_tensorflow(tmp_path: Path) -> None:
    for framework, expected in (("torch", True), ("tensorflow", False)):
        run = Run(
            tmp_path / f"{framework}.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV
        )
        end = _train(run, step_s=0.08)
        run.gpu(0, 1, end, util_gpu_pct=95, memory_used_bytes=78 * GiB, job_memory_bytes=GiB)
        run.event(0.1, "hook", framework, framework=framework)
        assert ("MEMORY_PRESSURE" in _codes(_diagnose(run))) is expected


def test_saturated_gpu_is_healthy_with_efficiency_hints_only(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV)
    end = _train(run, step_s=0.08)
    run.gpu(0, 1, end, util_gpu_pct=97, job_memory_bytes=GiB, sm_active_permille=400)
    run.util(0, 1, end, 98)
    run.event(0.1, "hook", "torch", framework="torch")
    diagnosis = _diagnose(run)
    assert _codes(diagnosis) == ["GPU_BOUND"]
    finding = diagnosis.findings[0]
    assert finding.severity is Severity.INFO and finding.speedup is None
    assert "larger batch" in finding.fix  # SM activity 0.4 < 0.5 (DCGM)
    assert diagnosis.phases["train"].gpu_util_pct == {0: pytest.approx(98.0)}  # driver buffer


def test_buffered_driver_samples_win_over_the_polled_counter(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV)
    end = _train(run, step_s=0.08)
    run.gpu(0, 1, end, util_gpu_pct=90, job_memory_bytes=GiB, every_s=1.0)  # smoothed
    run.util(0, 1, end, 30)  # the finer driver samples see the GPU mostly idle
    diagnosis = _diagnose(run)
    assert diagnosis.phases["train"].gpu_util_pct == {0: pytest.approx(30.0)}
    assert "HOST_BOUND" in _codes(diagnosis)


def test_gpu_rules_stay_quiet_without_gpu_samples(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=10, environment=NO_GPU_ENV)
    _train(run, step_s=0.08)
    run.phase("validation", 9.5, 9.9)
    diagnosis = _diagnose(run)
    assert diagnosis.findings == []
    assert diagnosis.phases["train"].gpu_util_pct is None


def test_another_frameworks_environment_error_does_not_hide_not_on_gpu(tmp_path: Path) -> None:
    # A CPU-only TensorFlow installed beside the job's PyTorch says nothing about the torch job.
    tf_cpu_only = {
        "code": "CPU_ONLY_BUILD",
        "severity": "error",
        "title": "tensorflow-cpu is CPU-only",
        "evidence": {"framework": "tensorflow"},
        "fix": "install tensorflow",
        "speedup": None,
        "speedup_method": None,
    }
    env = {"facts": {"schema_version": 1}, "findings": [tf_cpu_only]}
    run = Run(tmp_path / "r.db", duration_s=10, devices=[H100], environment=env)
    _train(run, step_s=0.08)
    run.gpu(0, 0, 10, util_gpu_pct=0, job_memory_bytes=0)
    run.event(0.1, "hooks", "instrumented torch", module="torch")
    assert _codes(_diagnose(run))[0] == "NOT_ON_GPU"


def test_a_sliver_of_a_phase_waiting_a_fifth_of_its_time_is_not_input_bound(tmp_path: Path) -> None:
    """Validation of four small batches, each waiting 30 % of its step: highly input-bound by
    share, but 0.8 % of the steady work, so the fix buys nothing a user would notice."""
    run = Run(tmp_path / "r.db", duration_s=20, environment=NO_GPU_ENV)
    end = _train(run, step_s=0.1, count=100)  # 1 .. 11 s, no wait
    start = end + 0.5
    run.steps("validation", start, 4, 0.014, wait_s=0.006)
    run.phase("validation", start, start + 0.08)
    diagnosis = _diagnose(run)
    assert diagnosis.phases["validation"].data_wait_fraction >= 0.2  # type: ignore[operator]
    assert _input_bound_phases(diagnosis) == []


@pytest.mark.parametrize("spread", [False, True])
def test_one_step_s_stall_is_no_input_pipeline_but_the_same_wait_recurring_is(
    tmp_path: Path, spread: bool
) -> None:
    """An evaluation of 8 steps of 30 ms after training, 0.8 s of wait in all: in one step's
    read (a stall partway through: a collection, the process descheduled), or 0.1 s in each.
    Both are 77 % of the phase and 7 % of all steady time; only the recurring wait is a pipeline
    too slow for its steps."""
    run = Run(tmp_path / "r.db", duration_s=13, environment=NO_GPU_ENV)
    end = _train(run, step_s=0.1, count=100)  # 1 .. 11 s, no wait
    start = end + 0.5
    if spread:
        t = run.steps("evaluate", start, 8, 0.03, wait_s=0.1)
    else:
        t = run.steps("evaluate", start, 4, 0.03, wait_s=0.0001)
        t = run.steps("evaluate", t, 1, 0.03, wait_s=0.8)
        t = run.steps("evaluate", t, 3, 0.03, wait_s=0.0001)
    run.phase("evaluate", start, t)
    diagnosis = _diagnose(run)
    phase = diagnosis.phases["evaluate"]
    assert phase.data_wait_fraction == pytest.approx(0.77, abs=0.01)
    assert phase.steady_wait_longest_s == pytest.approx(0.1 if spread else 0.8, abs=0.001)
    assert _input_bound_phases(diagnosis) == (["evaluate"] if spread else [])


def test_full_collections_inside_the_waits_are_given_in_the_evidence(tmp_path: Path) -> None:
    """A job's process (pid 7) waits 60 ms of each 100 ms step; three full garbage collections
    of 20 ms fall inside waits, one inside a step's compute and one in another process."""
    run = Run(tmp_path / "r.db", duration_s=12, environment=NO_GPU_ENV)
    end = run.steps("train", 1.0, 100, 0.04, wait_s=0.06, pid=7)
    run.phase("train", 1.0, end)
    for at_s, pid in ((3.01, 7), (5.01, 7), (7.01, 7), (4.07, 7), (6.01, 8)):
        run.event(at_s, "gc", "full garbage collection", duration_ns=20_000_000, pid=pid)
    [finding] = [f for f in _diagnose(run).findings if f.code == "INPUT_BOUND"]
    assert finding.evidence["wait_in_gc_s"] == pytest.approx(0.06)


def test_steady_steps_waiting_after_a_long_start_up_stay_input_bound(tmp_path: Path) -> None:
    """A short try of a long job: 60 s of start-up, then 3 s of steps waiting 60 % of the time.
    The wait is 3 % of the run's wall time, but all of the work that would repeat."""
    run = Run(tmp_path / "r.db", duration_s=64, environment=NO_GPU_ENV)
    _train(run, wait_s=0.06, step_s=0.04, start=60.0, count=30)
    [finding] = [f for f in _diagnose(run).findings if f.code == "INPUT_BOUND"]
    assert finding.evidence["run_wait_fraction"] < 0.05
    assert finding.evidence["steady_run_wait_fraction"] == pytest.approx(0.6, abs=0.02)


def _copies(run: Run, seconds: float, size: int, count: int = 100) -> None:
    run.event(5, "pageable_copy", "", phase="train", count=count, ns=int(seconds * 1e9), bytes=size)
    run.event(0.1, "hook", "torch", framework="torch")


def test_pageable_copies_blocking_the_host_are_pageable_copy_not_host_bound(
    tmp_path: Path,
) -> None:
    """The shape of the H200's pageable_copy job: the host blocked in copies most of training,
    the GPU running kernels 18 % of it."""
    run = Run(tmp_path / "r.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV)
    end = _train(run, step_s=0.08)  # 8 s of training
    run.gpu(0, 1, end, util_gpu_pct=18, job_memory_bytes=GiB)
    _copies(run, seconds=7.0, size=32 * 10**9)
    diagnosis = _diagnose(run)
    assert _codes(diagnosis) == ["PAGEABLE_COPY"]  # the cause named: no HOST_BOUND beside it
    found = diagnosis.findings[0]
    assert found.severity == Severity.WARNING and "pin_memory=True" in found.fix
    assert found.evidence["pageable_copy_fraction"] == pytest.approx(7.0 / 8.0, abs=0.01)
    assert found.evidence["copy_bytes_per_s"] == pytest.approx(32e9 / 7.0, rel=1e-3)
    # 7 s blocked, less the 32 GB at the gen5 x16 link's 63.0 GB/s (0.51 s): 6.49 s, within
    # the 8 s x 0.82 = 6.56 s the GPU ran no kernel.
    link = 32 * 16e9 * 128 / 130 / 8
    assert found.evidence["saved_s"] == pytest.approx(7.0 - 32e9 / link, abs=0.01)
    assert found.speedup == pytest.approx(10 / (10 - (7.0 - 32e9 / link)), rel=1e-2)


def test_pageable_copies_save_no_more_than_the_gpus_idle_time(tmp_path: Path) -> None:
    """A busy GPU: the copies' blocked time was mostly the stream's kernels drained first."""
    run = Run(tmp_path / "r.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV)
    end = _train(run, step_s=0.08)
    run.gpu(0, 1, end, util_gpu_pct=75, job_memory_bytes=GiB)
    _copies(run, seconds=4.0, size=10**9)
    found = next(f for f in _diagnose(run).findings if f.code == "PAGEABLE_COPY")
    assert found.evidence["saved_s"] == pytest.approx(8 * 0.25, abs=0.01)


def test_a_few_pageable_copies_are_info_and_a_sliver_is_nothing(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV)
    end = _train(run, step_s=0.08)
    run.gpu(0, 1, end, util_gpu_pct=30, job_memory_bytes=GiB)
    _copies(run, seconds=0.8, size=10**9)  # 10 % of training: moderate
    diagnosis = _diagnose(run)
    assert _codes(diagnosis)[:2] == ["HOST_BOUND", "PAGEABLE_COPY"]
    found = next(f for f in diagnosis.findings if f.code == "PAGEABLE_COPY")
    assert found.severity == Severity.INFO and found.evidence["band"] == "moderate"
    run2 = Run(tmp_path / "r2.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV)
    end = _train(run2, step_s=0.08)
    run2.gpu(0, 1, end, util_gpu_pct=30, job_memory_bytes=GiB)
    _copies(run2, seconds=0.3, size=10**9)  # under 5 %
    assert "PAGEABLE_COPY" not in _codes(_diagnose(run2))
