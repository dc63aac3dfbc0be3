"""The kernel timeline's data (report/html/kernel_lanes.py), on real public traces and on a
CONSTRUCTED trace larger than the page's op budget. The drawing is tested in a real browser
(test_html_browser.py)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from gpuwhy.analysis.kernels.diagnosis import diagnose_traces
from gpuwhy.report.html.kernel_lanes import MAX_NAME_CHARS, MAX_OPS, kernel_lanes, rank_lanes
from gpuwhy.report.html.kernel_section import KERNELS_ELEMENT_ID
from gpuwhy.report.html.page import MAX_HTML_BYTES
from gpuwhy.report.html.trace_page import render_trace_html
from gpuwhy.traces import OpKind, RankTrace, load_traces
from support.kernel_traces import big_trace

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
RESNET = TRACES / "kineto-samples" / "resnet50_num_workers_0.1623143566756.pt.trace.json.gz"
NCCL = TRACES / "hta" / "a100_nccl_rank0_of_2.json.gz"
GPU = TRACES.parent / "gpu"


def decoded(data: dict) -> list[tuple[int, int, int, int, str, int]]:
    """(device, stream, start, duration, name, kind) of every op the data holds."""
    ops = []
    for lane in data["lanes"]:
        starts = itertools.accumulate(lane["start"])
        for start, dur, name, kind in zip(
            starts, lane["dur"], lane["name"], lane["kind"], strict=True
        ):
            ops.append((lane["device"], lane["stream"], start, dur, data["names"][name], kind))
    return sorted(ops)


@pytest.mark.parametrize("path", [RESNET, NCCL], ids=["resnet", "nccl"])
def test_every_op_of_the_steps_is_on_its_streams_lane_as_the_trace_has_it(path: Path) -> None:
    (trace,) = load_traces(str(path))
    data = rank_lanes(trace)
    assert data is not None
    lo = min(s for _, s, _ in trace.steps)
    hi = max(e for _, _, e in trace.steps)
    ops = trace.ops
    expected = sorted(
        (
            ops.device[i],
            ops.stream[i],
            max(ops.start_ns[i], lo) - lo,
            min(ops.end_ns[i], hi) - max(ops.start_ns[i], lo),
            trace.names[ops.name[i]][:MAX_NAME_CHARS],
            ops.kind[i],
        )
        for i in range(len(ops))
        if ops.end_ns[i] > lo and ops.start_ns[i] < hi
    )
    assert decoded(data) == expected
    assert data["ops_drawn"] == data["ops_total"] == len(expected) > 3000
    assert data["detail_end_ns"] is None and data["span_ns"] == hi - lo
    assert len(data["lanes"]) == len({(d, s) for d, s, *_ in expected})
    assert [step[0] for step in data["steps"]] == sorted(n for n, _, _ in trace.steps)
    if path == NCCL:  # communication kernels keep their kind
        assert {kind for *_, kind in expected} >= {OpKind.COMPUTE, OpKind.COMMUNICATION}
    else:  # the loader's waits, in the steps' time
        assert len(data["loader"]) == len(trace.loader) == 6
        assert all(0 <= a < b <= data["span_ns"] for a, b in data["loader"])


def test_a_trace_over_the_budget_keeps_its_first_whole_steps() -> None:
    trace = big_trace(steps=10, ops_per_step=150)
    data = rank_lanes(trace, budget=500)
    assert data is not None
    # 500 ops reach into the fourth step (3 x 150 = 450): detail stops where it began.
    assert data["detail_end_ns"] == 3_000_000
    assert data["ops_drawn"] == 450 and data["ops_total"] == 1500
    assert max(start + dur for _, _, start, dur, _, _ in decoded(data)) <= 3_000_000
    assert len(data["steps"]) == 10 and len(data["loader"]) == 10  # the whole span still
    assert max(len(name) for name in data["names"]) == MAX_NAME_CHARS


def test_the_budget_is_shared_among_ranks_and_a_rank_without_device_work_has_none() -> None:
    ranks = [big_trace(steps=40, ops_per_step=1000) for _ in range(2)]
    empty = RankTrace(path="cpu.pt.trace.json", rank=2)
    empty.steps.append((0, 0, 1_000_000))
    first, second, none = kernel_lanes([*ranks, empty])
    assert none is None
    assert first is not None and second is not None
    assert first["ops_drawn"] == second["ops_drawn"] <= MAX_OPS // 3


def test_a_page_at_the_op_budget_stays_under_the_size_limit() -> None:
    trace = big_trace(steps=200, ops_per_step=1000)  # 200,000 ops
    page = render_trace_html(diagnose_traces([trace]), [trace])
    assert len(page.encode("utf-8")) < MAX_HTML_BYTES
    block = page.split(f'id="{KERNELS_ELEMENT_ID}">', 1)[1].split("</script>", 1)[0]
    (data,) = json.loads(block)
    assert data["ops_drawn"] <= MAX_OPS < data["ops_total"]
    assert "<" not in block  # JSON safe inside the script element


def test_a_page_says_when_the_steps_are_timed_on_the_device() -> None:
    """The H200 pageable_copy fixed window: its host ran ahead (docs/traces.md)."""
    window = GPU / "2026-11-29-nvidia-h200" / "pageable_copy" / "window-fixed.gpuwhy.profile"
    traces = load_traces(str(window))
    page = render_trace_html(diagnose_traces(traces), traces)
    assert "5 (timed on the device: the host ran ahead)" in page
