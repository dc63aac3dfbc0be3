"""Worker processes give the report the numbers one process gives, and the report survives
them failing: a recording aligned and drawn with workers, without, and with workers that
cannot read the file."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from constructed import H100, Run, device

from gpuwhy.analysis import Diagnosis, diagnose
from gpuwhy.analysis import workers as workers_module
from gpuwhy.analysis.workers import ENV_VAR, Aligner, Alignment, Workers, worker_count
from gpuwhy.recording import Recording
from gpuwhy.recording.merged import MergedRecording
from gpuwhy.recording.writer import RecordingWriter
from gpuwhy.report.html.timeline import timeline_data
from support.synth import DEFAULT_START_NS, synthesize

pytestmark = pytest.mark.slow  # starts interpreters


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Twenty minutes of four GPUs with epochs of train and validation (tests/support/synth)."""
    path = tmp_path_factory.mktemp("workers") / "run.gpuwhy.db"
    synthesize(path, hours=1 / 3, gpus=4, seed=7)
    return path


@pytest.fixture
def workers() -> Iterator[Workers]:
    """Two workers, stopped after the test."""
    started = Workers(2)
    yield started
    started.close()


def _windows(recording: Recording) -> dict[str, list[tuple[int, int]]]:
    """Phase windows of the recording, cut often, at odd nanoseconds."""
    start, end = recording.run_bounds() or (0, 0)
    cuts = list(range(start + 1_234_567, end, 37_000_000_001))
    train = [(a, b) for a, b in zip(cuts[0::2], cuts[1::2], strict=False)]
    validation = [(b, c) for b, c in zip(cuts[1::2], cuts[2::2], strict=False)]
    return {"train": train, "validation": validation, "run": [(start, end)]}


def _both_ways(recording: Recording, count: int) -> tuple[Diagnosis, Diagnosis]:
    """The diagnosis made with `count` workers (which must have done their part) and alone."""
    workers = Workers(count)
    try:
        parallel = diagnose(recording, workers=workers)
        assert workers.count == count, "the workers failed and the work fell back"
    finally:
        workers.close()
    return parallel, diagnose(recording)


def _aligned_here(recording: Recording, windows: dict[str, list[tuple[int, int]]]) -> Alignment:
    aligner = Aligner(recording, Workers(0))
    aligner.start(windows)
    return aligner.result()


def test_workers_align_exactly_as_this_process(synthetic: Path, workers: Workers) -> None:
    with Recording.open(synthetic) as recording:
        windows = _windows(recording)
        aligner = Aligner(recording, workers)
        aligner.start(windows)
        by_workers = aligner.result()
        assert workers.count == 2, "the workers failed and the alignment fell back"
        expected = _aligned_here(recording, windows)
    assert by_workers == expected
    assert sorted(expected["train"]) == [0, 1, 2, 3]
    assert all(list(by_device) == sorted(by_device) for by_device in by_workers.values())
    assert expected["train"][2].samples > 0 and expected["validation"][2].samples > 0


def test_a_restarted_alignment_answers_for_the_last_windows(
    synthetic: Path, workers: Workers
) -> None:
    with Recording.open(synthetic) as recording:
        windows = _windows(recording)
        aligner = Aligner(recording, workers)
        aligner.start({"train": windows["validation"]})
        aligner.start(windows)
        got = aligner.result()
        assert workers.count == 2
        assert got == _aligned_here(recording, windows)


def test_the_diagnosis_is_the_same_with_and_without_workers(
    synthetic: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, "2")
    with Recording.open(synthetic) as recording:
        parallel, serial = _both_ways(recording, worker_count(recording))
    assert parallel == serial
    assert set(parallel.phases) >= {"train", "validation"}
    assert all(d.samples > 0 for d in parallel.devices)


def test_a_phase_known_only_by_its_steps_is_aligned_over_its_steps(tmp_path: Path) -> None:
    """Its extent appears only once the steps are read: the alignment started from the phase
    marks alone is started again."""
    run = Run(tmp_path / "r.db", duration_s=20, devices=[H100, device(1)])
    run.phase("validation", 12, 15)
    run.steps("train", 2, 40, 0.2)  # no PHASE span: 2 s to 10 s
    run.gpu(0, 0, 11, util_gpu_pct=60).gpu(0, 11, 20, util_gpu_pct=10)
    run.gpu(1, 0, 20, util_gpu_pct=30)
    with run.close() as recording:
        parallel, serial = _both_ways(recording, 2)
    assert parallel == serial
    assert parallel.phases["train"].intervals == ((2_000_000_000, 10_000_000_000),)
    assert parallel.phases["train"].gpu_util_pct == {0: 60.0, 1: 30.0}
    assert parallel.phases["validation"].gpu_util_pct == {0: 10.0, 1: 30.0}


def test_workers_that_cannot_read_the_file_leave_the_work_to_this_process(
    synthetic: Path, tmp_path: Path, workers: Workers
) -> None:
    moved = tmp_path / "moved.gpuwhy.db"
    moved.write_bytes(synthetic.read_bytes())
    with Recording.open(moved) as recording:
        windows = _windows(recording)
        os.rename(moved, tmp_path / "elsewhere.gpuwhy.db")  # open here, gone for the workers
        aligner = Aligner(recording, workers)
        aligner.start(windows)
        assert aligner.result() == _aligned_here(recording, windows)
    assert workers.count == 0, "the failed workers were not given up"


def test_who_gets_workers(synthetic: Path, tmp_path: Path) -> None:
    with Recording.open(synthetic) as recording:
        assert recording.rows_at_most("gpu") < 1_000_000
        assert worker_count(recording, environ={}) == 0  # small: not worth starting them
        assert worker_count(recording, environ={ENV_VAR: "3"}) == 3
        assert worker_count(recording, environ={ENV_VAR: " 64 "}) == 8
        assert worker_count(recording, environ={ENV_VAR: "many"}) == 0
        assert worker_count(recording, environ={ENV_VAR: "-2"}) == 0
        assert worker_count(MergedRecording([recording]), environ={ENV_VAR: "3"}) == 3
    assert Workers(0).count == 0 and Workers(0).submit(sum, [1]) is None
    live = tmp_path / "live.gpuwhy.db"
    writer = RecordingWriter(live)
    try:
        with Recording.open(live) as recording:  # its writer still has it
            assert not recording.complete
            assert worker_count(recording, environ={ENV_VAR: "3"}) == 0
    finally:
        writer.close()


def test_the_timeline_drawn_with_workers_is_the_one_drawn_here(
    synthetic: Path, workers: Workers
) -> None:
    with Recording.open(synthetic) as recording:
        diagnosis = diagnose(recording)
        # A small budget: a grid of stored tiers, which the workers draw from.
        alone = timeline_data(diagnosis, recording, budget_bytes=150_000)
        drawn = timeline_data(diagnosis, recording, budget_bytes=150_000, workers=workers)
        assert workers.count == 2
    assert alone["tiers"][0]["bucket_s"] in (1, 2, 5, 10)  # whole seconds: stored tiers
    assert [lane["title"] for lane in drawn["gpu_lanes"]] == [
        lane["title"] for lane in alone["gpu_lanes"]
    ]
    assert drawn == alone
    assert len(drawn["gpu_lanes"]) == 4 and drawn["host_lane"] is not None


@pytest.mark.parametrize(
    ("function", "args"),
    [(os._exit, (3,)), (int, ("not a number",))],
    ids=["a worker dies", "a function fails"],
)
def test_a_worker_that_dies_or_fails_gives_no_answer_and_stops_the_rest(
    function: Callable[..., object], args: tuple[object, ...], workers: Workers
) -> None:
    good = workers.submit(sum, [1, 2, 3])
    assert workers.results([good]) == [6]
    bad = workers.submit(function, *args)
    other = workers.submit(sum, [4])
    assert workers.results([other, bad]) is None
    assert workers.count == 0 and workers.submit(sum, [1]) is None


def test_a_long_recording_gets_a_worker_per_core_up_to_one_per_gpu(
    synthetic: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workers_module, "MIN_GPU_SAMPLES", 1_000)  # this one counts as long
    with Recording.open(synthetic) as recording:
        assert len(recording.sampled_devices()) == 4
        for cpus, expected in ((1, 0), (2, 2), (3, 3), (16, 4)):
            monkeypatch.setattr(workers_module, "usable_cores", lambda cpus=cpus: cpus)
            assert worker_count(recording, environ={}) == expected, cpus


def _node(folder: Path, index: int) -> Path:
    """Another node of the job: the same run, its own host, and a monotonic clock 7.3 s apart
    from the previous node's (the job's clock is the first node's)."""
    path = folder / f"node{index}.gpuwhy.db"
    synthesize(path, hours=1 / 6, gpus=2, seed=7, start_ns=DEFAULT_START_NS + index * 7_300_000_123)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'hostname'", (json.dumps(f"n{index}"),))
    db.close()
    return path


def test_a_jobs_nodes_are_aligned_by_workers_as_by_this_process(tmp_path: Path) -> None:
    """Each node's GPUs read from its own file on its own clock, numbered as in the job."""
    paths = [_node(tmp_path, k) for k in range(3)]
    nodes = [Recording.open(path) for path in paths]
    try:
        merged = MergedRecording(nodes)
        assert [offset for _, offset, _ in merged.parts()] == [0, -7_300_000_123, -14_600_000_246]
        assert worker_count(merged, environ={ENV_VAR: "2"}) == 2
        parallel, serial = _both_ways(merged, 2)  # type: ignore[arg-type]
    finally:
        for node in nodes:
            node.close()
    assert parallel == serial
    assert [d.info.index for d in parallel.devices] == list(range(6))
    util = parallel.phases["train"].gpu_util_pct or {}
    assert sorted(util) == list(range(6))
    assert sorted(k for k, pct in util.items() if pct < 5) == [1, 3, 5]  # each node's idle GPU
