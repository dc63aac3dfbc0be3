"""What the job's hooks could not see, in every report: terminal, JSON and HTML."""

from __future__ import annotations

import io
from pathlib import Path

import jsonschema
from constructed import GPU_OK_ENV, H100, Run

from gpuwhy.analysis import diagnose
from gpuwhy.recording import Recording
from gpuwhy.report import json_report
from gpuwhy.report.html.page import render_html
from gpuwhy.report.terminal import make_console, render

GiB = 2**30
REASON = "Keras's loop was compiled before gpuwhy's hooks were in place"
HOSTILE = "<script>alert(1)</script>"


def _run(path: Path) -> Run:
    run = Run(path, duration_s=10, devices=[H100], environment=GPU_OK_ENV, command=["python"])
    end = run.steps("train", 1, 60, 0.1)
    run.phase("train", 1, end)
    run.gpu(0, 0, 10, util_gpu_pct=95, job_memory_bytes=GiB)
    return run


def _terminal(run: Run) -> str:
    with run.close() as recording:
        diagnosis = diagnose(recording)
    out = io.StringIO()
    render(diagnosis, make_console(out, environ={}, width=200))
    return out.getvalue()


def test_a_phase_whose_wait_was_not_measured_says_why(tmp_path: Path) -> None:
    run = _run(tmp_path / "r.db")
    message = f"data wait of 'train' unknown: {REASON}"
    run.event(2, "data_wait_unavailable", message, phase="train", reason=REASON)
    text = _terminal(run)
    assert f"Not measured: data wait of 'train': {REASON}" in text
    assert text.index("Not measured") < text.index("Findings")  # under the phase table


def test_a_healthy_job_has_no_such_line(tmp_path: Path) -> None:
    run = _run(tmp_path / "r.db").event(0.5, "hooks", "instrumented keras", module="keras")
    assert "Not measured" not in _terminal(run)


def test_many_blind_spots_are_capped_in_the_terminal_and_all_in_the_json(tmp_path: Path) -> None:
    run = _run(tmp_path / "r.db")
    for n in range(6):
        run.event(1 + n, "hook", f"hook number {n} failed: ValueError()")
    run.event(8, "hooks_unavailable", "KeyError('CALL')", pid=9)
    text = _terminal(run)
    lines = [line for line in text.splitlines() if line.startswith("Not measured")]
    assert len(lines) == 4 and "did not load in the job (KeyError('CALL'))" in lines[0]
    assert "(+3 more not measured: --json)" in text
    with Recording.open(tmp_path / "r.db") as recording:
        report = json_report.to_dict(diagnose(recording))
    jsonschema.validate(report, json_report.schema())
    kinds = [spot["kind"] for spot in report["not_measured"]]
    assert kinds == ["hooks_unavailable"] + ["hook"] * 6
    # Its steps were recorded (another process of the job loaded its hooks): its verdict stands.
    assert "not seen inside" not in report["verdict"]


def test_the_html_page_says_it_escaped(tmp_path: Path) -> None:
    run = _run(tmp_path / "r.db")
    run.event(2, "data_wait_unavailable", "x", phase=HOSTILE, reason=HOSTILE)
    with run.close() as recording:
        page = render_html(diagnose(recording), recording)
    assert "Not measured: data wait of &#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27;" in page
    assert "<script>alert" not in page
