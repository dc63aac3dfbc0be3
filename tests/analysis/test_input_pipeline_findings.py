"""INPUT_BOUND says how the job's batches are made and fits its fix to that: the hooks' input
descriptions (hooks/input_pipelines.py) placed in their phases (inputs.py), on constructed
recordings through the real writer, reader and analysis. The descriptions are the ones the hooks
send for real pipelines (tests/hooks/test_input_pipelines.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from constructed import NO_GPU_ENV, Run

from gpuwhy.analysis import Diagnosis, diagnose
from gpuwhy.analysis.inputs import phase_inputs
from gpuwhy.analysis.rules import input_bound, input_pipeline
from gpuwhy.model import Event, Finding
from gpuwhy.wire import INPUT_EVENT


def _loader(workers: int, cores: int | None = 2) -> dict[str, Any]:
    return {
        "source": "DataLoader",
        "workers": workers,
        "prefetch_factor": 2 if workers else None,
        "persistent_workers": bool(workers),
        "pin_memory": False,
        "iterable": False,
        "cores": cores,
    }


def _dataset(**stages: bool) -> dict[str, Any]:
    described = {
        "source": "tf.data",
        "parallel": False,
        "prefetch": False,
        "injected_prefetch": True,
        "cache": False,
        "python": False,
        "generator": False,
        "cores": 2,
    }
    return described | stages


def _input_bound(
    tmp_path: Path,
    pipeline: dict[str, Any] | None,
    framework: str = "torch",
    job_cpu_pct: float | None = None,
) -> Finding:
    """A train phase 1..11 s waiting 60 % of its steps, its pipeline described at its start;
    the job's processes using `job_cpu_pct` of a core throughout, where given."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    run = Run(tmp_path / "r.db", duration_s=12, environment=NO_GPU_ENV)
    end = run.steps("train", 1.0, 100, 0.04, wait_s=0.06)
    run.phase("train", 1.0, end)
    if job_cpu_pct is not None:
        run.host(0.0, 12.0, job_cpu_pct=job_cpu_pct, cpu_system_pct=job_cpu_pct / 2)
    if "-" in framework:  # keras-<backend>
        backend = framework.split("-")[1]
        run.event(0.5, "hook", "keras integration", framework="keras", backend=backend)
    else:
        run.event(0.5, "hook", f"{framework} integration", framework=framework)
    if pipeline is not None:
        run.event(1.0, INPUT_EVENT, "the loop's input pipeline", **pipeline)
    with run.close() as recording:
        diagnosis: Diagnosis = diagnose(recording)
    return next(f for f in diagnosis.findings if f.code == "INPUT_BOUND")


def test_a_loader_without_workers_makes_batches_in_the_loop(tmp_path: Path) -> None:
    finding = _input_bound(tmp_path, _loader(0))
    assert finding.evidence["input"]["workers"] == 0
    assert finding.evidence["input_made"].startswith("each batch is made in the training loop")
    assert finding.fix.startswith("Now each batch is made in the training loop")
    assert finding.fix.endswith(input_bound.FIXES["torch"])


def test_workers_on_every_core_call_for_cheaper_items_not_more_workers(tmp_path: Path) -> None:
    finding = _input_bound(tmp_path, _loader(2, cores=2))
    assert "made beside the steps by 2 DataLoader worker processes" in finding.fix
    assert "already match the 2 cores" in finding.fix
    assert "num_workers=" not in finding.fix  # no more workers than cores


def test_workers_short_of_the_cores_call_for_more(tmp_path: Path) -> None:
    finding = _input_bound(tmp_path, _loader(2, cores=16))
    assert "num_workers=4" in finding.fix and "(2 now; the job may use 16 cores)" in finding.fix
    finding = _input_bound(tmp_path / "few", _loader(6, cores=8))
    assert "num_workers=8" in finding.fix  # doubled, up to the cores


def test_keras_on_torch_fed_by_a_dataloader_gets_the_dataloader_fix(tmp_path: Path) -> None:
    finding = _input_bound(tmp_path, _loader(0), framework="keras-torch")
    assert "PyDataset" not in finding.fix and "num_workers=4" in finding.fix
    # Without a description the framework's own fix stands.
    bare = _input_bound(tmp_path / "bare", None, framework="keras-torch")
    assert bare.fix == input_bound.FIXES["keras-torch"] and "input" not in bare.evidence


def _py_dataset(workers: int, processes: bool, cores: int = 8) -> dict[str, Any]:
    return {
        "source": "PyDataset",
        "workers": workers,
        "multiprocessing": processes,
        "max_queue_size": 10,
        "cores": cores,
    }


def test_pydataset_fixes_follow_how_keras_loads_it(tmp_path: Path) -> None:
    # Keras loads a PyDataset in the loop unless workers > 1, or one worker in a process.
    serial = _input_bound(tmp_path / "a", _py_dataset(1, False), framework="keras-torch")
    assert "makes each batch in the training loop" in serial.fix
    assert serial.fix.endswith(input_bound.FIXES["keras-torch"])
    threads = _input_bound(tmp_path / "b", _py_dataset(4, False), framework="keras-jax")
    assert "loaded beside the steps by 4 threads" in threads.fix
    assert "use_multiprocessing=True" in threads.fix and "workers=4" in threads.fix
    one_process = _input_bound(tmp_path / "c", _py_dataset(1, True), framework="keras-torch")
    assert "loaded beside the steps by 1 worker process," in one_process.fix
    assert "workers=2" in one_process.fix  # doubled
    full = _input_bound(tmp_path / "d", _py_dataset(2, True, cores=2), framework="keras-torch")
    assert "already match the 2 cores" in full.fix


def test_tf_data_fixes_follow_the_pipeline(tmp_path: Path) -> None:
    serial = _input_bound(tmp_path / "serial", _dataset(), framework="keras-tensorflow")
    assert "one batch at a time, ahead of the step only by its prefetch" in serial.fix
    assert serial.fix.endswith(input_bound.FIXES["tensorflow"])
    python = _input_bound(tmp_path / "python", _dataset(python=True), "keras-tensorflow")
    assert "num_parallel_calls=tf.data.AUTOTUNE" in python.fix
    assert "under the interpreter's lock" in python.fix
    parallel = _input_bound(tmp_path / "par", _dataset(parallel=True, prefetch=True), "keras-jax")
    assert "already runs in parallel" in parallel.fix and "cache()" in parallel.fix
    generated = _input_bound(
        tmp_path / "gen", _dataset(generator=True, python=True), "keras-tensorflow"
    )
    assert "from_generator" in generated.evidence["input_made"]
    assert "interleave several generators" in generated.fix
    unprefetched = _input_bound(
        tmp_path / "none", _dataset(injected_prefetch=False), "keras-tensorflow"
    )
    assert "one batch at a time, while the step waits" in unprefetched.fix


def _stats(tmp_path: Path, phases: dict[str, list[tuple[float, float]]]) -> dict[str, Any]:
    run = Run(tmp_path / "p.db", duration_s=30, environment=NO_GPU_ENV)
    for name, rounds in phases.items():
        for start, end in rounds:
            run.steps(name, start, 4, (end - start) / 4)
            run.phase(name, start, end)
    with run.close() as recording:
        return dict(diagnose(recording).phases)


def _event(at_s: float, **data: Any) -> Event:
    return Event(round(at_s * 1e9), INPUT_EVENT, "", data)


def test_each_phase_gets_the_pipeline_its_loop_read(tmp_path: Path) -> None:
    # Two epochs of train with a validation after each; the train loader's iterator is made
    # as train begins (its loop opens the phase: at its start), the validation loader's inside
    # the first validation; a second train loader described later is not train's.
    phases = _stats(tmp_path, {"train": [(1, 5), (7, 11)], "validation": [(5, 7), (11, 13)]})
    events = [
        _event(1.0, workers=4),
        _event(5.2, workers=0),
        _event(7.5, workers=1),
    ]
    found = phase_inputs(events, phases)
    assert found["train"]["workers"] == 4
    assert found["validation"]["workers"] == 0


def test_a_pipeline_described_before_its_phase_began_is_that_phase_s(tmp_path: Path) -> None:
    # A plain loop's iterator made a moment before the phase's first step (the loop's start),
    # and a later phase reading a dataset first read in an earlier one: the last described before.
    phases = _stats(tmp_path, {"train": [(2, 6)], "predict": [(8, 9)]})
    found = phase_inputs([_event(1.9, workers=2), _event(6.5, workers=0)], phases)
    assert found == {"train": {"workers": 2}, "predict": {"workers": 0}}
    assert phase_inputs([], phases) == {}
    assert phase_inputs([Event(1, "hook", "", {})], phases) == {}


def test_nested_phases_give_the_pipeline_to_the_innermost(tmp_path: Path) -> None:
    # A user's own phase around a validation inside it: the validation's loop read it.
    phases = _stats(tmp_path, {"outer": [(1, 10)], "validation": [(4, 6)]})
    assert phase_inputs([_event(4.5, workers=3)], phases) == {"validation": {"workers": 3}}
    # Described once as the outer loop began, and read again inside (one dataset for
    # training and validation, described once): both phases read it.
    found = phase_inputs([_event(2.0, workers=3)], phases)
    assert found == {"outer": {"workers": 3}, "validation": {"workers": 3}}


def test_a_plain_loop_s_own_reader_is_named(tmp_path: Path) -> None:
    generator = _input_bound(tmp_path / "g", {"source": "generator", "name": "batches"}, "jax")
    assert generator.fix.startswith(
        "Now the loop's own Python generator (`batches`) makes each batch in the training loop"
    )
    assert generator.fix.endswith(input_bound.FIXES["jax"])  # the framework's own fix
    reader = _input_bound(tmp_path / "i", {"source": "iterator", "name": "Loader.__next__"})
    assert "the loop's own iterator class (`Loader.__next__`)" in reader.fix


def test_busy_cores_bound_parallel_loading_and_put_a_cheaper_batch_first(tmp_path: Path) -> None:
    # 60 % waiting: the input made free reads 2.5x; the job keeps 1.6 of its 2 cores busy, so
    # the same work spread over workers gains at most 2 / 1.6 = 1.25x.
    finding = _input_bound(tmp_path, _loader(0, cores=2), job_cpu_pct=160.0)
    evidence = finding.evidence
    assert evidence["phase_speedup"] == pytest.approx(2.5, rel=0.01)
    assert (evidence["cores"], evidence["job_cpu_cores"]) == (2, 1.6)
    assert evidence["parallel_speedup_at_most"] == pytest.approx(1.25)
    assert finding.fix.startswith("Now each batch is made in the training loop")
    assert "keep 1.6 of the 2 cores it may use busy" in finding.fix
    assert "at most 1.25× faster (2.50× needs that work made cheaper)" in finding.fix
    cheaper = finding.fix.index(input_pipeline.CHEAPER)
    assert finding.fix.index(input_pipeline.THEN_PARALLEL) > cheaper  # workers, for what is left
    assert finding.fix.endswith(input_bound.FIXES["torch"])
    assert "parallel loading alone: at most 1.25x" in (finding.speedup_method or "")


def test_no_parallel_loading_where_it_would_gain_less_than_the_moderate_band(
    tmp_path: Path,
) -> None:
    finding = _input_bound(tmp_path / "tf", _dataset(), "tensorflow", job_cpu_pct=195.0)
    assert finding.evidence["parallel_speedup_at_most"] == pytest.approx(2 / 1.95, abs=0.001)
    assert finding.fix.endswith(input_pipeline.TF_CHEAPER)  # no "then" for what is left
    assert input_pipeline.THEN_PARALLEL not in finding.fix


def test_free_cores_leave_the_fix_as_it_was(tmp_path: Path) -> None:
    # A wait asleep (storage): 0.5 of 2 cores busy, 4x of room above the 2.5x estimate.
    idle = _input_bound(tmp_path / "idle", _loader(0, cores=2), job_cpu_pct=50.0)
    # Cores unknown (an older recording's description), or the job's CPU unsampled.
    unknown = _input_bound(tmp_path / "unknown", _loader(0, cores=None), job_cpu_pct=190.0)
    unsampled = _input_bound(tmp_path / "unsampled", _loader(0, cores=2))
    for finding in (idle, unknown, unsampled):
        assert "parallel_speedup_at_most" not in finding.evidence
        assert finding.fix.endswith(input_bound.FIXES["torch"])
        assert input_pipeline.CHEAPER not in finding.fix


def test_a_core_budget_needs_a_few_host_samples() -> None:
    pipeline = _loader(0, cores=2)
    assert input_pipeline.core_budget(pipeline, 150.0, input_pipeline.MIN_HOST_SAMPLES - 1) is None
    budget = input_pipeline.core_budget(pipeline, 150.0, input_pipeline.MIN_HOST_SAMPLES)
    assert budget is not None and budget.ceiling == pytest.approx(2 / 1.5)
    # More busy than the cores (sampling between the processes' starts): no gain, not below 1.
    assert input_pipeline.CoreBudget(cores=2, busy=2.2).ceiling == 1.0
