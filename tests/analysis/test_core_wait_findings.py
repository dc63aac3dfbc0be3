"""The stepping thread's waits for a core (hooks/core_waits.py) in the analysis: read over the
steady steps from the thread's cumulative readings, and counted by INPUT_BOUND where the input's
worker processes took the cores, in proportion to their share of the other CPU use. Constructed
recordings through the real writer, reader and analysis; the readings are shaped as the hooks
send them (tests/hooks/test_hooks_core_waits.py); a real job's: tests/scenarios/test_busy_cores.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from constructed import NO_GPU_ENV, Run, ns

from gpuwhy.analysis import diagnose
from gpuwhy.analysis.rules import input_pipeline
from gpuwhy.analysis.steady import thread_ns_within
from gpuwhy.model import Finding
from gpuwhy.wire import CORE_WAIT_EVENT, INPUT_EVENT

PID = 4242
S = 1_000_000_000


def test_a_thread_s_counters_are_read_linearly_between_readings() -> None:
    # Run 0.3 s and queued 0.5 s a second, read every half second from 1 s to 11 s.
    readings = [(ns(t / 2), int(0.3 * ns(t / 2)), int(0.5 * ns(t / 2))) for t in range(2, 23)]
    assert thread_ns_within(readings, [(2 * S, 4 * S)]) == (int(0.6 * S), S)
    # Between readings (2.25 s to 2.75 s) the counters grow linearly.
    assert thread_ns_within(readings, [(2_250_000_000, 2_750_000_000)]) == (
        int(0.15 * S),
        int(0.25 * S),
    )
    # Two intervals add up; a stretch outside the readings (before 1 s, after 11 s) counts nothing.
    assert thread_ns_within(readings, [(0, 2 * S), (10 * S, 20 * S)]) == (int(0.6 * S), S)
    assert thread_ns_within(readings, [(20 * S, 30 * S)]) is None
    assert thread_ns_within(readings[:1], [(0, 30 * S)]) is None


def _loader(workers: int) -> dict[str, Any]:
    return {"source": "DataLoader", "workers": workers, "persistent_workers": bool(workers),
            "pin_memory": False, "iterable": False, "cores": 2}  # fmt: skip


def _diagnosis(
    tmp_path: Path,
    pipeline: dict[str, Any],
    *,
    job_cpu_pct: float = 190.0,
    system_cpu_pct: float = 97.0,
    queued_per_s: float | None = 0.5,
) -> Any:
    """A 20 ms-step train phase from 1 s to 11 s whose steps hardly wait (1 ms each), its
    main thread running 0.3 s and waiting for a core `queued_per_s` s a second of wall time
    (readings every half second, as the hooks send them); the job's processes using
    `job_cpu_pct` of a core, the machine's two cores `system_cpu_pct` busy."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    run = Run(tmp_path / "r.db", duration_s=12, environment=NO_GPU_ENV)
    end = run.steps("train", 1.0, 476, 0.02, wait_s=0.001, pid=PID)
    run.phase("train", 1.0, end)
    run.host(0.0, 12.0, job_cpu_pct=job_cpu_pct, cpu_system_pct=system_cpu_pct)
    run.event(0.5, "hook", "torch integration", framework="torch")
    run.event(1.0, INPUT_EVENT, "the loop's input pipeline", **pipeline)
    if queued_per_s is not None:
        for half in range(1, 25):
            t = half / 2
            run.event(t, CORE_WAIT_EVENT, run_ns=int(0.3 * ns(t)),
                      queued_ns=int(queued_per_s * ns(t)), pid=PID)  # fmt: skip
    with run.close() as recording:
        return diagnose(recording)


def _input_bound(diagnosis: Any) -> Finding | None:
    return next((f for f in diagnosis.findings if f.code == "INPUT_BOUND"), None)


def test_workers_that_take_the_step_s_cores_make_the_phase_input_bound(tmp_path: Path) -> None:
    diagnosis = _diagnosis(tmp_path, _loader(2))
    train = diagnosis.phases["train"]
    steady = train.steady_time_s
    assert train.steady_core_wait_s == pytest.approx(0.5 * steady, rel=0.02)
    assert train.steady_thread_run_s == pytest.approx(0.3 * steady, rel=0.02)
    finding = _input_bound(diagnosis)
    assert finding is not None
    evidence = finding.evidence
    # The job's other CPU: 1.9 - 0.3 = 1.6 cores; the rest of the machine: 1.94 - 1.9 = 0.04.
    share = 1.6 / (1.6 + 0.04)
    assert evidence["input_core_wait_s"] == pytest.approx(0.5 * steady * share, rel=0.02)
    cost = evidence["input_cost_fraction"]
    assert cost == pytest.approx(0.5 * share + train.steady_data_wait_s / steady, abs=0.01)
    assert evidence["phase_speedup"] == pytest.approx(1 / (1 - cost), rel=0.02)
    assert evidence["data_wait_fraction"] < 0.1  # the waits alone: no finding
    assert "or for the cores their input's workers take" in finding.title
    assert "waited for a core" in finding.fix and "Make each batch cheaper" in finding.fix
    assert "num_workers=" not in finding.fix  # more workers would take more of the cores
    # A lower bound: the compute slowed beside the workers shows in no wait.
    assert finding.speedup_method.endswith("so the gain can be larger")


def test_the_cores_other_processes_take_are_not_the_input_s(tmp_path: Path) -> None:
    # The job uses 1.0 core (0.7 beyond the thread), the machine's two cores are all busy: the
    # rest of the machine (1.0 core) took the larger part of the thread's waits.
    diagnosis = _diagnosis(tmp_path, _loader(2), job_cpu_pct=100.0, system_cpu_pct=100.0)
    finding = _input_bound(diagnosis)
    assert finding is not None
    steady = diagnosis.phases["train"].steady_time_s
    assert finding.evidence["input_core_wait_s"] == pytest.approx(
        0.5 * steady * 0.7 / 1.7, rel=0.02
    )
    # Another tenant alone keeps the cores busy: nothing is the input's.
    alone = _diagnosis(tmp_path / "b", _loader(2), job_cpu_pct=30.0, system_cpu_pct=100.0)
    assert _input_bound(alone) is None


def test_a_wait_for_a_core_is_the_input_s_only_where_workers_make_the_batches(
    tmp_path: Path,
) -> None:
    # In the loop (no workers): the job's other CPU may be the step's own compute threads.
    assert _input_bound(_diagnosis(tmp_path / "a", _loader(0))) is None
    # Not read (no scheduler statistics): nothing is counted, the phase's figures say so.
    unread = _diagnosis(tmp_path / "b", _loader(2), queued_per_s=None)
    assert unread.phases["train"].steady_core_wait_s is None
    assert _input_bound(unread) is None
    # Under the moderate band of the steady time: not counted.
    assert _input_bound(_diagnosis(tmp_path / "c", _loader(2), queued_per_s=0.03)) is None


def test_worker_processes_are_told_from_threads_of_the_training_process() -> None:
    assert input_pipeline.in_worker_processes(_loader(2))
    assert not input_pipeline.in_worker_processes(_loader(0))
    assert input_pipeline.in_worker_processes({"source": "PyDataset", "multiprocessing": True})
    assert not input_pipeline.in_worker_processes({"source": "PyDataset", "workers": 4})
    assert not input_pipeline.in_worker_processes({"source": "tf.data", "parallel": True})
