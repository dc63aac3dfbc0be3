"""The terminal summary: golden text at a fixed width, plain when not a terminal."""

from __future__ import annotations

import io
import os
from pathlib import Path

from constructed import GPU_OK_ENV, H100, NO_GPU_ENV, Run
from rich.console import Console

from gpuwhy.analysis import diagnose
from gpuwhy.report.terminal import render

GOLDEN = Path(__file__).resolve().parent / "golden"
GiB = 2**30


def _plain(width: int) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=width, force_terminal=False, color_system=None,
                   legacy_windows=False, _environ={}), out


def _input_bound_gpu_run(path: Path) -> Run:
    run = Run(path, duration_s=12, devices=[H100], environment=GPU_OK_ENV,
              command=["python", "train.py", "--epochs", "1"])
    end = run.steps("train", 1, 100, 0.04, wait_s=0.06)
    run.phase("train", 1, end).phase("validation", end, 12)
    run.steps("validation", end, 5, 0.1)
    run.gpu(0, 1, end, util_gpu_pct=30, job_memory_bytes=GiB)
    run.gpu(0, end, 12, util_gpu_pct=90, job_memory_bytes=GiB)
    run.event(0.5, "hook", "keras", framework="keras", backend="tensorflow")
    return run


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("GPUWHY_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def test_golden_input_bound_gpu_run_at_width_100(tmp_path: Path) -> None:
    console, out = _plain(100)
    with _input_bound_gpu_run(tmp_path / "r.db").close() as recording:
        render(diagnose(recording), console)
    text = out.getvalue()
    assert "\x1b[" not in text  # plain: no escape codes when not a terminal
    assert max(len(line) for line in text.splitlines()) <= 100
    _check_golden("input_bound_gpu_w100.txt", text)


def test_golden_cpu_run_lists_the_environment_problem(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=8, environment=NO_GPU_ENV)
    end = run.steps("train", 1, 50, 0.1)
    run.phase("train", 1, end)
    console, out = _plain(80)
    with run.close() as recording:
        render(diagnose(recording), console)
    _check_golden("cpu_no_driver_w80.txt", out.getvalue())


def test_narrow_terminal_wraps_within_its_width(tmp_path: Path) -> None:
    console, out = _plain(60)
    with _input_bound_gpu_run(tmp_path / "r.db").close() as recording:
        render(diagnose(recording), console)
    assert max(len(line) for line in out.getvalue().splitlines()) <= 60
    assert "INPUT_BOUND" in out.getvalue()
