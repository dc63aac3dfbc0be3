"""`gpuwhy export REC --perfetto FILE` end to end on real recordings (constructed sample values).

Every trace event is validated against the Chrome trace-event format's required keys per phase
type; the file must parse as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import jsonschema
import pytest

from gpuwhy.cli import main
from gpuwhy.model import (
    DeviceInfo,
    Event,
    GpuSample,
    HostSample,
    Span,
    SpanKind,
    UtilKind,
    UtilSample,
)
from gpuwhy.recording import Recording, RecordingWriter
from gpuwhy.report.perfetto.trace import GPU_COUNTERS, GPU_PID_BASE, HOST_PID, write_trace

START = 5_000_000_000_000
MS = 1_000_000
NUMBER = {"type": "number"}
BASE = {
    "name": {"type": "string", "minLength": 1},
    "pid": {"type": "integer"},
    "tid": {"type": "integer"},
}
TRACE_EVENT = {
    "oneOf": [
        {
            "type": "object",
            "required": ["name", "ph", "ts", "pid", "tid", "args"],
            "properties": {
                **BASE,
                "ph": {"const": "C"},
                "ts": {"type": "number", "minimum": 0},
                "args": {"type": "object", "minProperties": 1, "additionalProperties": NUMBER},
            },
        },
        {
            "type": "object",
            "required": ["name", "ph", "ts", "dur", "pid", "tid"],
            "properties": {
                **BASE,
                "ph": {"const": "X"},
                "ts": {"type": "number", "minimum": 0},
                "dur": {"type": "number", "minimum": 0},
                "args": {"type": "object"},
            },
        },
        {
            "type": "object",
            "required": ["name", "ph", "ts", "pid", "tid", "s"],
            "properties": {
                **BASE,
                "ph": {"const": "i"},
                "ts": {"type": "number", "minimum": 0},
                "s": {"enum": ["g", "p", "t"]},
                "args": {"type": "object"},
            },
        },
        {
            "type": "object",
            "required": ["name", "ph", "pid", "args"],
            "properties": {
                **BASE,
                "ph": {"const": "M"},
                "name": {"enum": ["process_name", "thread_name", "process_sort_index"]},
                "args": {"type": "object", "minProperties": 1},
            },
        },
    ]
}
TRACE = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "traceEvents": {"type": "array", "items": TRACE_EVENT},
        "displayTimeUnit": {"enum": ["ms", "ns"]},
    },
}


def _recording(path: Path) -> Path:
    writer = RecordingWriter(path)
    writer.set_meta("start_ns", START)
    writer.set_meta("command", ["python", "train.py"])
    writer.add_devices([DeviceInfo(0, "constructed GPU A"), DeviceInfo(1, "constructed GPU B")])
    for i in range(20):
        t = START + i * 100 * MS
        for device in (0, 1):
            writer.put(
                GpuSample(
                    t,
                    device,
                    util_gpu_pct=(i * 7 + device) % 101,
                    util_mem_pct=20,
                    memory_used_bytes=(8 << 30) + i * (1 << 20),
                    sm_clock_mhz=1410,
                    power_mw=250_000 + i,
                    temperature_c=60,
                    pcie_tx_kbps=1000 * i,
                    pcie_rx_kbps=5,
                    pcie_gen=4,
                    pcie_width=16,
                    clock_event_reasons=0x4,
                    sm_active_permille=815,
                    sm_occupancy_permille=300,
                    tensor_active_permille=120,
                    dram_active_permille=451,
                    job_memory_bytes=7 << 30,
                    job_sm_pct=80,
                )
            )
        writer.put(UtilSample(t + 50 * MS, 0, UtilKind.GPU, i % 2 * 100))
        writer.put(
            HostSample(
                t,
                cpu_system_pct=40.5,
                job_cpu_pct=99.9,
                job_rss_bytes=2 << 30,
                job_processes=3,
                memory_available_bytes=10 << 30,
            )
        )
    writer.put(Span("train", SpanKind.PHASE, START + 100 * MS, START + 1900 * MS, pid=4321))
    for step in range(4):
        s = START + (200 + step * 400) * MS
        writer.put(Span("train", SpanKind.WAIT, s, s + 50 * MS, step=step, pid=4321))
        writer.put(Span("train", SpanKind.STEP, s, s + 300 * MS, step=step, pid=4321))
    writer.put(
        Span("validation", SpanKind.STEP, START + 1950 * MS, START + 1990 * MS, step=0, steps=4)
    )
    writer.put(Event(START + 1995 * MS, "child_exited", "exit 0", {"code": 0}))
    writer.close()
    return path


def _export(tmp_path: Path) -> dict:
    rec = _recording(tmp_path / "run.gpuwhy.db")
    out = tmp_path / "trace.json"
    assert main(["export", str(rec), "--perfetto", str(out)]) == 0
    trace = json.loads(out.read_text(encoding="utf-8"))
    jsonschema.validate(trace, TRACE)
    return trace


def test_every_event_is_well_formed_and_the_file_is_json(tmp_path: Path, capsys) -> None:
    trace = _export(tmp_path)
    assert "trace events" in capsys.readouterr().out
    phases = {event["ph"] for event in trace["traceEvents"]}
    assert phases == {"C", "X", "i", "M"}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".gpuwhy-trace")] == []


def test_every_gpu_metric_has_a_counter_track_per_gpu(tmp_path: Path) -> None:
    events = _export(tmp_path)["traceEvents"]
    tracks = {(e["pid"], e["name"], *e["args"]) for e in events if e["ph"] == "C"}
    for device in (0, 1):
        for _, name, unit, _ in GPU_COUNTERS:
            assert (GPU_PID_BASE + device, name, unit) in tracks
    assert (GPU_PID_BASE, "GPU utilization (driver samples)", "%") in tracks
    assert (HOST_PID, "job CPU (100 = one core)", "%") in tracks
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert {"GPU 0: constructed GPU A", "host", "job process 4321"} <= names


def test_counters_are_written_on_change_and_once_at_the_end(tmp_path: Path) -> None:
    events = _export(tmp_path)["traceEvents"]

    def series(name: str, device: int = 0) -> list[tuple[float, float]]:
        return [
            (e["ts"], next(iter(e["args"].values())))
            for e in events
            if e["ph"] == "C" and e["name"] == name and e["pid"] == GPU_PID_BASE + device
        ]

    assert series("temperature") == [(0, 60), (1995000, 60)]  # constant: first and end
    util = series("GPU utilization")
    assert len(util) == 21 and util[3] == (300000, 21)  # 20 changes + the end
    assert series("power")[1] == (100000, 250.001)  # mW shown in W
    assert series("SM active")[0] == (0, 81.5)  # permille shown in %


def test_spans_are_complete_events_in_microseconds_from_the_start(tmp_path: Path) -> None:
    events = _export(tmp_path)["traceEvents"]
    spans = {e["name"]: e for e in events if e["ph"] == "X"}
    assert spans["train"]["ts"] == 100000 and spans["train"]["dur"] == 1800000
    assert spans["train"]["pid"] == 4321 and spans["train"]["tid"] == 1
    assert spans["train step 2"]["ts"] == 1000000 and spans["train step 2"]["tid"] == 2
    assert spans["train input wait"]["tid"] == 3
    assert spans["validation steps 0–3"]["pid"] == 0
    (instant,) = [e for e in events if e["ph"] == "i"]
    assert instant["name"] == "child_exited" and instant["ts"] == 1995000
    assert instant["args"] == {"message": "exit 0", "code": 0}


@pytest.mark.slow
def test_the_trace_is_streamed_not_built_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "long.gpuwhy.db"
    writer = RecordingWriter(path)
    for i in range(25_000):  # every sample changes two counters
        writer.put(GpuSample(START + i * MS, 0, util_gpu_pct=i % 101, power_mw=i))
    writer.close()
    out = tmp_path / "long.json"
    with Recording.open(path) as rec, out.open("w") as handle:
        tracemalloc.start()
        count = write_trace(rec, handle)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert count > 50_000
    assert peak < 2 * 1024 * 1024, peak  # the events as a list would take over 20 MB
    assert len(json.loads(out.read_text())["traceEvents"]) == count


def test_standard_output(tmp_path: Path, capsys) -> None:
    rec = _recording(tmp_path / "run.gpuwhy.db")
    assert main(["export", str(rec), "--perfetto", "-"]) == 0
    jsonschema.validate(json.loads(capsys.readouterr().out), TRACE)


@pytest.mark.parametrize("case", ["missing", "corrupt", "no-flag", "same-file", "bad-folder"])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys, case: str) -> None:
    rec = tmp_path / "run.gpuwhy.db"
    if case == "corrupt":
        rec.write_bytes(b"not a recording at all" * 100)
    elif case != "missing":
        _recording(rec)
    args = {
        "missing": [str(rec), "--perfetto", str(tmp_path / "t.json")],
        "corrupt": [str(rec), "--perfetto", str(tmp_path / "t.json")],
        "no-flag": [str(rec)],
        "same-file": [str(rec), "--perfetto", str(rec)],
        "bad-folder": [str(rec), "--perfetto", str(tmp_path / "no" / "dir" / "t.json")],
    }[case]
    assert main(["export", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuwhy: ") and err.count("\n") == 1 and " — " in err
    assert not (tmp_path / "t.json").exists()


def test_the_command_line_never_shows_a_traceback(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuwhy",
            "export",
            str(tmp_path / "x.db"),
            "--perfetto",
            str(tmp_path / "t.json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "no recording at" in out.stderr


def _series(events: list[dict], name: str, pid: int) -> list[tuple[float, float]]:
    return [
        (e["ts"], next(iter(e["args"].values())))
        for e in events
        if e["ph"] == "C" and e["name"] == name and e["pid"] == pid
    ]


def _trace(tmp_path: Path, *flags: str) -> dict:
    rec = tmp_path / "run.gpuwhy.db"
    if not rec.exists():
        _recording(rec)
    out = tmp_path / "trace.json"
    assert main(["export", str(rec), "--perfetto", str(out), *flags]) == 0
    trace = json.loads(out.read_text(encoding="utf-8"))
    jsonschema.validate(trace, TRACE)
    return trace


def test_a_window_holds_what_happened_in_it(tmp_path: Path) -> None:
    trace = _trace(tmp_path, "--start", "0.5", "--end", "1.5")
    events = trace["traceEvents"]
    util = _series(events, "GPU utilization", GPU_PID_BASE)
    assert util[0] == (500000, 35) and util[-2] == (1400000, 98)  # samples 5..14, then the end
    assert util[-1][0] == 1500000
    spans = {e["name"]: e for e in events if e["ph"] == "X"}
    assert spans["train"]["ts"] == 100000  # the phase began before the window: it overlaps
    assert {"train step 1", "train step 2"} <= set(spans) and "train step 0" not in spans
    assert not [e for e in events if e["ph"] == "i"]  # the child exited after the window
    assert trace["otherData"]["window_s"] == [0.5, 1.5]
    assert trace["otherData"]["counters"] == "every sample"


def test_long_windows_get_counters_from_the_stored_tiers(tmp_path: Path, capsys) -> None:
    trace = _trace(tmp_path, "--resolution", "1s")
    events = trace["traceEvents"]
    # Samples 0..9 and 10..19 of GPU 0: utilization (7 i) mod 101, averaged per second.
    assert _series(events, "GPU utilization", GPU_PID_BASE) == [
        (0, 31.5),
        (1000000, 51.0),
        (1995000, 51.0),
    ]
    assert _series(events, "clock event reasons", GPU_PID_BASE)[0] == (0, 4)  # the bits seen
    assert _series(events, "GPU utilization (driver samples)", GPU_PID_BASE)[0] == (0, 50.0)
    assert _series(events, "job CPU (100 = one core)", HOST_PID)[0] == (0, 99.9)
    assert "second" in trace["otherData"]["counters"]
    assert "1-s" in capsys.readouterr().out  # the command says what it wrote
    minute = _trace(tmp_path, "--resolution", "1min")["traceEvents"]
    assert _series(minute, "GPU utilization", GPU_PID_BASE)[0] == (0, 41.25)
    assert _series(minute, "power", GPU_PID_BASE) == [(0, 250.01), (1995000, 250.01)]


def test_too_many_steps_become_counters_per_process(tmp_path: Path) -> None:
    from gpuwhy.report.perfetto.trace import trace_plan

    path = _recording(tmp_path / "run.gpuwhy.db")
    out = tmp_path / "trace.json"
    with Recording.open(path) as rec, out.open("w") as handle:
        plan = trace_plan(rec)
        assert plan.every_span and plan.counter_width_ns == 0 and plan.steps_and_waits == 9
        summarised = type(plan)(None, None, 0, False, plan.steps_and_waits)
        write_trace(rec, handle, plan=summarised)
    trace = json.loads(out.read_text())
    jsonschema.validate(trace, TRACE)
    events = trace["traceEvents"]
    assert {e["name"] for e in events if e["ph"] == "X"} == {"train"}  # phases only
    steps = _series(events, "steps per second", 4321)
    assert steps[0] == (0, 2.0)  # steps 0 and 1 start in the first second
    assert steps[1] == (1000000, pytest.approx(2 / 0.995, abs=1e-3))  # the run ends at 1.995 s
    assert _series(events, "input wait", 4321)[0] == (0, 10.0)  # 2 × 50 ms of the first second
    assert _series(events, "steps per second", 0)[1][1] == pytest.approx(4 / 0.995, rel=1e-3)
    assert "per-process counters" in trace["otherData"]["spans"]


@pytest.mark.parametrize(
    "flags",
    [["--start", "2", "--end", "1"], ["--start", "-1"], ["--end", "x"], ["--resolution", "10s"]],
)
def test_a_bad_window_is_one_line_and_exit_2(tmp_path: Path, capsys, flags: list[str]) -> None:
    rec = _recording(tmp_path / "run.gpuwhy.db")
    assert main(["export", str(rec), "--perfetto", str(tmp_path / "t.json"), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuwhy: ") and err.count("\n") == 1
    assert not (tmp_path / "t.json").exists()


@pytest.mark.slow
def test_a_long_fast_recording_exports_means_and_every_span(tmp_path: Path) -> None:
    from support.synth import synthesize

    # Synthetic (constructed data shaped like a training run, labelled so): 8 GPUs at 100 Hz
    # for 6 minutes, more samples than a trace should carry one by one.
    synthesize(tmp_path / "fast.gpuwhy.db", hours=0.1, gpus=8, rate_hz=100, seed=1)
    trace = _trace_of(tmp_path / "fast.gpuwhy.db", tmp_path / "fast.json")
    assert "each second" in trace["otherData"]["counters"]
    util = _series(trace["traceEvents"], "GPU utilization", GPU_PID_BASE)
    assert 100 < len(util) <= 6 * 60 + 2
    assert trace["otherData"]["spans"].startswith("every")
    window = _trace_of(
        tmp_path / "fast.gpuwhy.db", tmp_path / "w.json", "--start", "60", "--end", "90"
    )
    assert window["otherData"]["counters"] == "every sample"
    assert len(_series(window["traceEvents"], "power", GPU_PID_BASE)) > 1000  # 100 Hz


def _trace_of(rec: Path, out: Path, *flags: str) -> dict:
    assert main(["export", str(rec), "--perfetto", str(out), *flags]) == 0
    trace = json.loads(out.read_text(encoding="utf-8"))
    jsonschema.validate(trace, TRACE)
    return trace
