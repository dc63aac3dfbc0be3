"""NOT_ON_GPU seen partly in a trace: host operators that launch no device work hold the step
while the GPU idles. Exact on hand-built traces; quiet on every committed real trace whose GPU
ran the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwhy.analysis.kernels.diagnosis import diagnose_traces
from gpuwhy.analysis.kernels.host_ops import cpu_ops
from gpuwhy.analysis.kernels.steps import rank_facts
from gpuwhy.model import Finding, Severity
from gpuwhy.traces import load_traces, read_kineto
from support import ROOT

MAIN, SIDE = 11, 22  # the step thread and a side thread


def _cpu(name: str, ts: float, dur: float, tid: int = MAIN, cat: str = "cpu_op") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": tid, "args": {}}


def _launched(ts: float, start: float, dur: float, corr: int) -> list[dict]:
    """An operator at ``ts`` launching a kernel that runs from ``start`` for ``dur`` µs."""
    return [
        _cpu("aten::mm", ts, 8),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts + 1, "dur": 5,
         "tid": MAIN, "args": {"correlation": corr}},
        {"ph": "X", "cat": "kernel", "name": f"k{corr}", "ts": start, "dur": dur, "tid": 7,
         "args": {"device": 0, "stream": 7, "correlation": corr}},
    ]  # fmt: skip


def _trace(tmp_path: Path, steps: list[list[dict]]) -> Path:
    """Steps of 1000 µs each, their events shifted to their own step."""
    events: list[dict] = []
    for number, step in enumerate(steps):
        base = 1000 * number
        events.append(_cpu(f"ProfilerStep#{number + 1}", base, 1000, cat="user_annotation"))
        events.extend({**event, "ts": event["ts"] + base} for event in step)
    path = tmp_path / "t.pt.trace.json"
    path.write_text(
        json.dumps({"deviceProperties": [{"id": 0, "name": "H200"}], "traceEvents": events})
    )
    return path


def _step(kernel_end: float) -> list[dict]:
    """The GPU runs a kernel from 10 µs to ``kernel_end``, the host then runs a CPU cumsum
    300-700 µs (with a nested CPU op inside), and launches the step's last kernel, 710-1000."""
    return [
        *_launched(0, 10, kernel_end - 10, 1),
        _cpu("aten::cumsum", 300, 400),
        _cpu("aten::empty", 310, 20),  # nested: counted in its caller, not twice
        _cpu("aten::sort", 400, 250),  # nested, not a view: still its caller's time
        *_launched(700, 710, 290, 2),
    ]


def _partly(path: Path) -> Finding | None:
    diagnosis = diagnose_traces(load_traces(str(path)))
    return next(
        (
            f
            for f in diagnosis.findings
            if f.code == "NOT_ON_GPU" and f.evidence["seen"] == "partly"
        ),
        None,
    )


def test_a_cpu_operator_under_an_idle_gpu_is_found_with_its_exposed_time(tmp_path: Path) -> None:
    path = _trace(tmp_path, [_step(kernel_end=200), _step(kernel_end=200)])
    found = _partly(path)
    assert found is not None and found.severity is Severity.WARNING  # 40 %: XProf's high band
    # the GPU idles 300-700 under the cumsum: 0.4 ms of each 1 ms step
    assert found.evidence["exposed_ms_per_step"] == 0.4
    assert found.evidence["exposed_fraction"] == 0.4
    (name,) = found.evidence["cpu_ops"]
    assert name == "aten::cumsum"
    assert found.evidence["cpu_ops"][name] == {
        "exposed_ms_per_step": 0.4,
        "share_of_step": 0.4,
        "host_ms_per_step": 0.4,
        "calls_per_step": 1.0,
    }
    assert found.speedup == pytest.approx(1 / (1 - 0.4), abs=1e-3)
    assert found.speedup_method.startswith("at most")
    assert "x.to(device, non_blocking=True)" in found.fix and "model.to(device)" in found.fix


def test_the_same_operator_under_queued_kernels_costs_nothing(tmp_path: Path) -> None:
    """The kernel launched first runs until 750 µs: the cumsum (300-700) runs beside it."""
    path = _trace(tmp_path, [_step(kernel_end=750), _step(kernel_end=750)])
    found = cpu_ops(rank_facts(read_kineto(str(path))))
    assert found is not None and found.exposed_ns == [0, 0]
    assert _partly(path) is None


@pytest.mark.parametrize(
    ("kernel_end", "exposed_us", "severity"),
    [(660, 40, None), (600, 100, Severity.INFO), (450, 250, Severity.WARNING)],
)
def test_only_the_part_left_idle_counts_in_xprof_s_bands(
    tmp_path: Path, kernel_end: int, exposed_us: int, severity: Severity | None
) -> None:
    """Queued work covers the cumsum's first part: the rest is its exposed time, judged in the
    input bands (5 % info, 20 % warning of the 1 ms step)."""
    path = _trace(tmp_path, [_step(kernel_end), _step(kernel_end)])
    found = cpu_ops(rank_facts(read_kineto(str(path))))
    assert found is not None and found.exposed_ns == [exposed_us * 1000] * 2
    finding = _partly(path)
    assert (finding and finding.severity) == severity
    if finding is not None:
        assert finding.speedup == pytest.approx(1000 / (1000 - exposed_us), abs=1e-3)


def test_what_other_findings_own_is_left_out(tmp_path: Path) -> None:
    """The same idle GPU under operators that touch the device (a copy, a sync), collate a batch
    inside the data loader, only make views, or run on a side thread: none is a CPU operator
    the step waits on."""
    step = [
        *_launched(0, 10, 190, 1),
        _cpu("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 210, 100,
             cat="user_annotation"),
        _cpu("aten::stack", 220, 80),  # collating, inside the loader's call
        _cpu("aten::_local_scalar_dense", 320, 100),  # .item(): it syncs
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": 330, "dur": 80,
         "tid": MAIN, "args": {}},
        _cpu("aten::copy_", 430, 100),  # a pageable copy: a runtime call inside
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "ts": 440, "dur": 80,
         "tid": MAIN, "args": {}},
        _cpu("aten::view", 540, 60),  # no data touched
        _cpu("aten::cumsum", 300, 400, tid=SIDE),  # a side thread (pin memory, logging)
        *_launched(700, 710, 290, 2),
    ]  # fmt: skip
    path = _trace(tmp_path, [step, step])
    found = cpu_ops(rank_facts(read_kineto(str(path))))
    assert found is not None and found.exposed_ns == [0, 0]
    assert _partly(path) is None


def test_short_operators_are_not_kept_one_by_one(tmp_path: Path) -> None:
    path = _trace(tmp_path, [[*_launched(0, 10, 100, 1), _cpu("aten::add", 200, 9)]])
    trace = read_kineto(str(path))
    assert trace.cpu_op_calls["aten::add"] == 1  # counted in the totals
    kept = {trace.op_names[i] for i in trace.host_ops.name}
    assert kept == set()  # aten::mm is 8 µs, aten::add 9 µs: both under 10 µs
    assert trace.step_threads == {MAIN}


CAPTURES = ROOT / "tests" / "data" / "gpu"
REAL = sorted(
    str(path.relative_to(ROOT))
    for path in [
        *(ROOT / "tests" / "data" / "traces").rglob("*.json.gz"),
        *CAPTURES.rglob("*trace.json*"),
    ]
)


@pytest.mark.parametrize("path", REAL)
def test_no_real_trace_whose_gpu_ran_the_model_has_cpu_operators_left(path: str) -> None:
    """The committed real traces: the H200 capture's cpu_model job ran all of it on the CPU (the
    whole case, not this one); in the others the host operators that launch nothing (aten::zeros
    of CPU tensors, a sum, comparisons) leave the GPU idle under 0.1 % of the steps."""
    for trace in load_traces(str(ROOT / path)):
        facts = rank_facts(trace)
        found = cpu_ops(facts)
        if found is not None:
            time_ns = sum(s.time_ns for s in facts.steps)
            assert sum(found.exposed_ns) / time_ns < 0.001, path
    diagnosis = diagnose_traces(load_traces(str(ROOT / path)))
    codes = [(f.code, f.evidence.get("seen")) for f in diagnosis.findings]
    assert ("NOT_ON_GPU", "partly") not in codes
    assert (("NOT_ON_GPU", "whole") in codes) == ("cpu_model" in path)
