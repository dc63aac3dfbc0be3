"""Per-step and per-device figures of a trace: each step's own row, each device's own busy time
and idle split, held to the rank's medians and unions on the real published traces, and exact on
a hand-built two-GPU trace."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import jsonschema
import pytest

from gpuwhy.analysis.intervals import total_ns, union
from gpuwhy.analysis.kernels.diagnosis import RankSummary, diagnose_traces
from gpuwhy.analysis.kernels.steps import rank_facts
from gpuwhy.report import json_report
from gpuwhy.traces import load_traces, read_kineto
from gpuwhy.traces.xplane import environment_has_pb2

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
BERT = DATA / "tensorflow-profiler" / "bert_multi_gpu.xplane.pb"
KINETO = [
    "kineto-samples/resnet50_num_workers_0.1623143089861.pt.trace.json.gz",
    "hta/a100_rank0_of_16.json.gz",
    "hta/a100_dataloader_rank3_of_8.json.gz",
    "hta/two_ranks",
    "hta/a100_alexnet.json.gz",
]


def _ranks(path: str) -> list[RankSummary]:
    diagnosis = diagnose_traces(load_traces(str(DATA / path)))
    assert diagnosis.kernels is not None
    return diagnosis.kernels.ranks


@pytest.mark.parametrize("path", KINETO)
def test_the_rank_figures_summarise_its_step_rows(path: str) -> None:
    for rank in _ranks(path):
        rows = rank.per_step
        assert len(rows) == rank.steps > 0
        assert [r["number"] for r in rows] == sorted(r["number"] for r in rows)
        assert rank.step_time_p50_s == pytest.approx(
            statistics.median(r["time_s"] for r in rows), abs=1e-4
        )
        assert rank.kernels_per_step == statistics.median(r["kernels"] for r in rows)
        medians = [r["kernel_median_us"] for r in rows if r["kernel_median_us"] is not None]
        assert rank.kernel_median_us == pytest.approx(statistics.median(medians), abs=1e-3)
        for name in ("loader_ms", "sync_ms", "optimizer_ms"):
            assert getattr(rank, name) == pytest.approx(
                statistics.mean(r[name] for r in rows), abs=1e-3
            )
        # the rank's shares are of the steps' summed time: the rows weighted by their time
        time_s = sum(r["time_s"] for r in rows)
        busy = sum(r["gpu_busy"] * r["time_s"] for r in rows) / time_s
        assert rank.gpu_busy == pytest.approx(busy, abs=1e-3)
        for row in rows:
            idle = row["idle_split"]
            assert row["gpu_busy"] + sum(idle.values()) == pytest.approx(1, abs=2e-4)
            (device,) = row["device_busy"].values()  # one GPU a rank in these traces
            assert device == row["gpu_busy"]


@pytest.mark.parametrize("path", KINETO)
def test_one_device_s_own_figures_are_the_rank_s(path: str) -> None:
    for rank in _ranks(path):
        (device,) = rank.per_device.values()
        assert device["busy"] == pytest.approx(rank.gpu_busy, abs=1e-4)
        assert device["idle_split"] == pytest.approx(rank.idle_split, abs=1e-4)
        assert device["work_split"] == pytest.approx(rank.work_split, abs=1e-4)
        assert device["busy"] + sum(device["idle_split"].values()) == pytest.approx(1, abs=2e-4)


@pytest.mark.skipif(not environment_has_pb2(), reason="no TensorFlow or XProf: no xplane reader")
def test_each_gpu_of_the_multi_gpu_bert_host_has_its_own_figures() -> None:
    """Three of the host's eight GPUs ran work; XProf's one step bounds GPU 4's: the other two
    replicas' kernels ran outside it, so inside the step they idled."""
    (trace,) = load_traces(str(BERT))
    facts = rank_facts(trace)
    (step,) = facts.steps
    (rank,) = _ranks(str(BERT))
    assert list(rank.per_device) == ["1", "4", "6"]
    for device, row in rank.per_device.items():
        ops = trace.ops
        spans = union(
            (max(ops.start_ns[i], step.start_ns), min(ops.end_ns[i], step.end_ns))
            for i in range(len(ops))
            if ops.device[i] == int(device)
            and ops.end_ns[i] > step.start_ns
            and ops.start_ns[i] < step.end_ns
        )
        assert row["busy"] == pytest.approx(total_ns(spans) / step.time_ns, abs=1e-4)
        assert row["busy"] + sum(row["idle_split"].values()) == pytest.approx(1, abs=2e-4)
        assert row["busy"] <= rank.gpu_busy + 1e-4  # each device under the union
    assert rank.per_device["4"]["busy"] == pytest.approx(rank.gpu_busy, abs=1e-4)
    assert rank.per_device["1"]["busy"] == rank.per_device["6"]["busy"] == 0
    (row,) = rank.per_step
    assert row["device_busy"] == {d: r["busy"] for d, r in rank.per_device.items()}


def _op(device: int, ts: float, dur: float, corr: int) -> list[dict]:
    return [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts - 5, "dur": 1,
         "args": {"correlation": corr}},
        {"ph": "X", "cat": "kernel", "name": f"k{corr}", "ts": ts, "dur": dur,
         "args": {"device": device, "stream": 7, "correlation": corr}},
    ]  # fmt: skip


def test_two_gpus_taking_turns_are_each_half_busy(tmp_path: Path) -> None:
    """GPU 0 runs 0-50 µs, GPU 1 runs 50-100 µs (launched at 45: it waited for the host):
    the rank's union is busy all the step, each device half of it."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#3", "ts": 0, "dur": 100, "args": {}},
        *_op(0, 0, 50, 1),
        *_op(1, 50, 50, 2),
    ]
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    diagnosis = diagnose_traces([read_kineto(str(path))])
    assert diagnosis.kernels is not None
    (rank,) = diagnosis.kernels.ranks
    assert rank.gpu_busy == 1.0
    assert rank.per_device["0"]["busy"] == rank.per_device["1"]["busy"] == 0.5
    assert rank.per_device["0"]["idle_split"]["other"] == 0.5  # nothing ran after it
    assert rank.per_device["1"]["idle_split"]["host_wait"] == 0.5  # launched at 45, idle 0-50
    (row,) = rank.per_step
    assert row["number"] == 3 and row["kernels"] == 2
    assert row["device_busy"] == {"0": 0.5, "1": 0.5}
    jsonschema.validate(json_report.to_dict(diagnosis), json_report.schema())


@pytest.mark.parametrize("path", ["hta/two_ranks", "hta/a100_alexnet.json.gz"])
def test_the_json_report_with_step_and_device_rows_follows_the_schema(path: str) -> None:
    document = json_report.to_dict(diagnose_traces(load_traces(str(DATA / path))))
    jsonschema.validate(document, json_report.schema())
    for rank in document["trace"]["ranks"]:
        assert len(rank["per_step"]) == rank["steps"]
        assert set(rank["per_device"]) == set(rank["devices"])
