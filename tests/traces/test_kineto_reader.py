"""The Kineto reader on real published traces, checked against the whole file read by the
standard library (exact decimals): what it keeps is what the trace holds."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest

from gpuwhy.traces import OpKind, TraceError, is_trace_path, load_traces, read_kineto

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
ALL = sorted(DATA.rglob("*.json.gz"))
DEVICE_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}


def _whole(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as file:
        return json.load(file, parse_float=Decimal)


def test_the_test_data_is_all_there() -> None:
    assert len(ALL) == 13, ALL  # gzip-compressed Kineto traces
    assert (DATA / "README.md").exists()


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_every_device_op_step_and_loader_call_is_kept_exactly(path: Path) -> None:
    document = _whole(path)
    events = [e for e in document["traceEvents"] if e.get("ph") == "X"]
    device = [e for e in events if e.get("cat") in DEVICE_CATS]
    trace = read_kineto(str(path))
    assert len(trace.ops) == len(device)
    assert trace.events == len(document["traceEvents"])
    # Times are exact nanoseconds: the file's microseconds with their decimals, times 1000.
    starts = sorted(int(e["ts"] * 1000) for e in device)
    ends = sorted(int(e["ts"] * 1000) + int(e["dur"] * 1000) for e in device)
    assert sorted(trace.ops.start_ns) == starts
    assert sorted(trace.ops.end_ns) == ends
    steps = sorted(
        int(re.match(r"ProfilerStep#(\d+)", e["name"]).group(1))
        for e in events
        if e["name"].startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation"
    )
    assert sorted(number for number, _, _ in trace.steps) == steps
    loader = [e for e in events if e["name"].startswith("enumerate(DataLoader)#")]
    assert len(trace.loader) == len(loader)
    comm = sum(1 for e in device if "nccl" in e["name"].lower())
    assert sum(1 for k in trace.ops.kind if k == OpKind.COMMUNICATION) == comm


def test_rank_world_size_and_device_names_come_from_the_metadata() -> None:
    trace = read_kineto(str(DATA / "hta" / "a100_rank0_of_16.json.gz"))
    assert (trace.rank, trace.world_size) == (0, 16)
    assert trace.devices[0] == "NVIDIA A100-SXM4-80GB"
    old = read_kineto(str(next((DATA / "kineto-samples").glob("*workers_0*"))))
    assert old.rank is None and old.devices[0] == "Tesla V100-DGXS-32GB"
    assert old.backward_seen and len(old.optimizer) == 6


def test_nanosecond_timestamps_keep_their_nanoseconds() -> None:
    path = DATA / "hta" / "v100_ns_resolution.pt.trace.json.gz"
    trace = read_kineto(str(path))
    assert any(start % 1000 for start in trace.ops.start_ns)  # a float would round these away


def test_a_directory_is_one_trace_per_rank_in_rank_order() -> None:
    traces = load_traces(str(DATA / "hta" / "two_ranks"))
    assert [t.rank for t in traces] == [0, 1]


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def test_bad_input_is_a_one_line_trace_error(tmp_path: Path) -> None:
    original = (DATA / "hta" / "event_sync.json.gz").read_bytes()
    cases = {
        "truncated gzip": _write(tmp_path / "a.json.gz", original[: len(original) // 2]),
        "truncated json": _write(
            tmp_path / "b.json", gzip.decompress(original)[: len(gzip.decompress(original)) // 2]
        ),
        "not a trace": _write(tmp_path / "c.json", b'{"hello": [1, 2]}'),
        "not json": _write(tmp_path / "d.json", b"{ this is not json"),
        "missing": str(tmp_path / "missing.json"),
        "xplane": _write(tmp_path / "host.xplane.pb", b"\x0a\x00"),
    }
    empty = tmp_path / "empty"
    empty.mkdir()
    cases["no trace in directory"] = str(empty)
    for what, path in cases.items():
        with pytest.raises(TraceError) as caught:
            load_traces(path)
        line = caught.value.one_line()
        assert "\n" not in line and caught.value.fix, what
        assert caught.value.exit_code == 2, what


def test_two_traces_of_one_rank_are_refused(tmp_path: Path) -> None:
    source = DATA / "hta" / "two_ranks" / "sampled_rank-0.json.gz"
    for name in ("a.json.gz", "b.json.gz"):
        (tmp_path / name).write_bytes(source.read_bytes())
    with pytest.raises(TraceError, match="two traces of rank 0"):
        load_traces(str(tmp_path))


def test_recordings_are_not_taken_for_traces(tmp_path: Path) -> None:
    recording = tmp_path / "run.gpuwhy.db"
    recording.write_bytes(b"SQLite format 3\x00" + bytes(100))
    assert not is_trace_path(str(recording))
    assert is_trace_path(str(DATA / "hta" / "event_sync.json.gz"))
    assert is_trace_path(str(DATA / "hta" / "two_ranks"))
