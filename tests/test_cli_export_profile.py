"""`gpuwhy export PROFILE --perfetto FILE`: a real TensorFlow profile (XPlane), which Perfetto
cannot open, written as Chrome trace JSON; a Kineto trace, which it can, is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwhy.cli import main
from gpuwhy.traces import load_traces
from gpuwhy.traces.xplane import environment_has_pb2

DATA = Path(__file__).resolve().parent / "data" / "traces"
BERT = DATA / "tensorflow-profiler" / "bert_multi_gpu.xplane.pb"


@pytest.mark.skipif(not environment_has_pb2(), reason="no TensorFlow or XProf: no xplane_pb2")
def test_an_xplane_profile_becomes_a_chrome_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bert.json"
    assert main(["export", str(BERT), "--perfetto", str(out)]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    (trace,) = load_traces(str(BERT))
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == len(trace.ops) + len(trace.steps) + len(trace.loader) + len(trace.syncs)
    kernels = [e for e in complete if e["pid"] != 1000]
    assert sorted(e["ts"] * 1000 for e in kernels) == pytest.approx(sorted(trace.ops.start_ns))
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"GPU 1", "GPU 4", "GPU 6"} <= names  # XPlane does not name the GPU model
    assert "wrote" in capsys.readouterr().out


def test_a_kineto_trace_and_recording_flags_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kineto = DATA / "hta" / "event_sync.json.gz"
    assert main(["export", str(kineto), "--perfetto", str(tmp_path / "k.json")]) == 2
    assert "a Chrome trace already" in capsys.readouterr().err
    assert not (tmp_path / "k.json").exists()
    args = ["export", str(BERT), "--perfetto", str(tmp_path / "b.json"), "--start", "1"]
    assert main(args) == 2
    assert "recordings only" in capsys.readouterr().err
