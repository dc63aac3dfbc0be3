"""`gpuwhy report TRACE`: real published profiler traces through the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from gpuwhy.cli import main

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "traces"
SLOW = DATA / "kineto-samples" / "resnet50_num_workers_0.1623143566756.pt.trace.json.gz"
FIXED = DATA / "kineto-samples" / "resnet50_num_workers_4.1623213129365.pt.trace.json.gz"
SCHEMA = json.loads((ROOT / "src" / "gpuwhy" / "schemas" / "report.schema.json").read_text())


def test_terminal_report_names_the_cause_and_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(SLOW)]) == 0
    out = capsys.readouterr().out
    assert "profiler trace" in out and "Kernel level (from the trace)" in out
    assert "INPUT_BOUND" in out and "num_workers=4" in out
    assert "GPU busy 64% of 'train' time" in out


def test_json_report_follows_the_schema_with_gpu_busy_per_phase(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["report", str(DATA / "hta" / "two_ranks"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    jsonschema.validate(document, SCHEMA)
    assert [r["rank"] for r in document["trace"]["ranks"]] == [0, 1]
    busy = document["phases"]["train"]["gpu_busy"]["0"]
    assert busy == pytest.approx(document["trace"]["ranks"][0]["gpu_busy"], abs=1e-3)
    assert document["trace"]["ranks"][0]["temporal"]["idle"] == pytest.approx(0.5356, abs=0.02)


def test_html_is_written_for_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "trace.html"
    assert main(["report", str(SLOW), "--html", str(page)]) == 0
    text = page.read_text()
    assert 'class="kt"' in text and "INPUT_BOUND" in text
    # The kernel timeline: its data for the one rank, and the one script the policy allows.
    (lanes,) = json.loads(text.split('id="gpuwhy-kernels">', 1)[1].split("</script>", 1)[0])
    assert lanes["ops_drawn"] == lanes["ops_total"] > 1000
    assert text.count("<script>") == 1 and "script-src &#x27;sha256-" in text
    capsys.readouterr()


def test_fail_on_gates_on_the_slow_trace_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(SLOW), "--fail-on", "INPUT_BOUND"]) == 4
    assert main(["report", str(FIXED), "--fail-on", "INPUT_BOUND"]) == 0
    capsys.readouterr()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run(
        [sys.executable, "-m", "gpuwhy", *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_bad_traces_and_flags_are_one_line_and_exit_2(tmp_path: Path) -> None:
    broken = tmp_path / "broken.pt.trace.json.gz"
    broken.write_bytes(SLOW.read_bytes()[:5000])
    unwritable = tmp_path / "no" / "such" / "dir" / "r.html"
    for args in ([str(broken)], [str(SLOW), "--html", str(unwritable)]):
        done = _cli("report", *args)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert done.stdout == ""


WINDOW_RUN = ROOT / "tests" / "data" / "gpu" / "2026-11-26-nvidia-h200" / "torch_loader"


def test_a_recording_made_with_a_profiler_window_is_reported_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """REAL (H200 capture): `gpuwhy report` of a `run --profile` recording folds in the window
    written beside it, as `run` itself did; without the window, the run's report alone."""
    assert main(["report", str(WINDOW_RUN / "window-slow.gpuwhy.db"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    jsonschema.validate(document, SCHEMA)
    window = document["trace"]["window"]
    assert window["steps"] == 5 and window["inside_over_outside"] == pytest.approx(1.02, abs=0.05)
    assert document["trace"]["ranks"][0]["steps"] == 5
    alone = tmp_path / "window-slow.gpuwhy.db"
    alone.write_bytes((WINDOW_RUN / "window-slow.gpuwhy.db").read_bytes())
    assert main(["report", str(alone), "--json"]) == 0
    assert "trace" not in json.loads(capsys.readouterr().out)
    # A window that cannot be read: one warning line, and the run's report all the same.
    (tmp_path / "window-slow.gpuwhy.profile").mkdir()
    (tmp_path / "window-slow.gpuwhy.profile" / "rank0.pt.trace.json").write_text("{broken")
    assert main(["report", str(alone), "--json"]) == 0
    captured = capsys.readouterr()
    assert "trace" not in json.loads(captured.out)
    assert captured.err.count("\n") == 1 and "profiler window could not be read" in captured.err
