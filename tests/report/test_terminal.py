"""The terminal summary: golden text at fixed widths, plain when not a terminal or with NO_COLOR.

The recordings here are CONSTRUCTED (tests/analysis/constructed.py): their GPU samples imitate
NVML for a described situation. Golden files live in tests/report/golden/. After an intended
change of the report, regenerate them with

    GPUWHY_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/report/test_terminal.py

and review the diff (`git diff tests/report/golden`) before committing it. Without that variable
a golden file is only read, never written.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

from constructed import GPU_OK_ENV, H100, NO_GPU_ENV, Run, device
from rich.console import Console

from gpuwhy.analysis import Diagnosis, diagnose
from gpuwhy.report.terminal import RANK_ROWS_SHOWN, make_console, render
from gpuwhy.report.verdict import verdict
from gpuwhy.telemetry.nvml import GPU_PROCESS_EVENT
from gpuwhy.wire import PROCESS_EVENT

GOLDEN = Path(__file__).resolve().parent / "golden"
GiB = 2**30
ESCAPE = "\x1b["


def _plain(width: int) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return make_console(out, environ={}, width=width), out


def _input_bound_gpu_run(path: Path, framework: str = "keras") -> Run:
    run = Run(
        path,
        duration_s=12,
        devices=[H100],
        environment=GPU_OK_ENV,
        command=["python", "train.py", "--epochs", "1"],
    )
    end = run.steps("train", 1, 100, 0.04, wait_s=0.06)
    run.phase("train", 1, end).phase("validation", end, 12)
    run.steps("validation", end, 5, 0.1)
    run.gpu(0, 1, end, util_gpu_pct=30, job_memory_bytes=GiB)
    run.gpu(0, end, 12, util_gpu_pct=90, job_memory_bytes=GiB)
    if framework == "keras":
        run.event(0.5, "hooks", "Keras loop ran", framework="keras", backend="tensorflow")
    else:
        run.event(0.5, "hooks", f"instrumented {framework}", framework=framework)
    return run


def _healthy_gpu_run(path: Path) -> Run:
    run = Run(
        path, duration_s=10, devices=[H100], environment=GPU_OK_ENV, command=["python", "train.py"]
    )
    end = run.steps("train", 1, 100, 0.08)
    run.phase("train", 1, end)
    run.gpu(0, 1, end, util_gpu_pct=97, job_memory_bytes=GiB)
    run.event(0.1, "hooks", "Keras loop ran", framework="keras", backend="tensorflow")
    return run


def _diagnosis(run: Run) -> Diagnosis:
    with run.close() as recording:
        return diagnose(recording)


def _rendered(diagnosis: Diagnosis, width: int) -> str:
    console, out = _plain(width)
    render(diagnosis, console)
    return out.getvalue()


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("GPUWHY_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} differs (see module docstring)"


def _check_layout(text: str, width: int) -> None:
    lines = text.splitlines()
    assert ESCAPE not in text  # plain: no escape codes when not a terminal
    assert max(len(line) for line in lines) <= width
    assert [line for line in lines if line != line.rstrip()] == []  # no trailing blanks


def _prose(text: str) -> str:
    """The report outside its phase table, without any whitespace: what wrapping may not change.

    (A word longer than the line is folded, so even the blanks between words may move.)
    """
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("phase"))
    start = header - 1 if lines[header - 1].startswith(" ") else header  # a wrapped header
    end = next(i for i, line in enumerate(lines) if line.startswith(("Findings", "No runtime")))
    return "".join("".join(lines[:start] + lines[end:]).split())


def test_golden_input_bound_gpu_run_at_width_100(tmp_path: Path) -> None:
    text = _rendered(_diagnosis(_input_bound_gpu_run(tmp_path / "r.db")), 100)
    _check_layout(text, 100)
    assert text.splitlines()[1].startswith("Verdict: GPU busy 30% of 'train' time; 'train' steps")
    _check_golden("input_bound_gpu_w100.txt", text)


def test_golden_cpu_run_lists_the_environment_problem(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=8, environment=NO_GPU_ENV)
    end = run.steps("train", 1, 50, 0.1)
    run.phase("train", 1, end)
    text = _rendered(_diagnosis(run), 80)
    _check_layout(text, 80)
    _check_golden("cpu_no_driver_w80.txt", text)


def test_golden_healthy_gpu_run(tmp_path: Path) -> None:
    diagnosis = _diagnosis(_healthy_gpu_run(tmp_path / "r.db"))
    assert [f.code for f in diagnosis.findings] == ["GPU_BOUND"]  # the healthy hint, info only
    text = _rendered(diagnosis, 80)
    _check_layout(text, 80)
    assert "Verdict: GPU busy 97% of 'train' time; no runtime problem found (1 hint)" in text
    assert "INFO GPU_BOUND" in text and "WARNING" not in text and "ERROR" not in text
    _check_golden("healthy_gpu_w80.txt", text)


def test_golden_torch_input_bound_run_shows_the_dataloader_fix(tmp_path: Path) -> None:
    diagnosis = _diagnosis(_input_bound_gpu_run(tmp_path / "r.db", framework="torch"))
    assert diagnosis.framework == "torch"
    text = _rendered(diagnosis, 100)
    _check_layout(text, 100)
    fix = _prose(text).split("fix:", 1)[1]
    assert fix.startswith("Loadbatchesinworkerprocesses:`DataLoader(ds,batch_size=...,num_workers=")
    assert "tf.data" not in fix.split("estimate:")[0]  # the torch snippet, not TensorFlow's
    _check_golden("torch_input_bound_gpu_w100.txt", text)


def test_narrow_and_wide_terminals_wrap_without_losing_content(tmp_path: Path) -> None:
    diagnosis = _diagnosis(_input_bound_gpu_run(tmp_path / "r.db"))
    narrow, wide = _rendered(diagnosis, 60), _rendered(diagnosis, 120)
    _check_layout(narrow, 60)
    _check_layout(wide, 120)
    assert len(narrow.splitlines()) > len(wide.splitlines())  # it did wrap
    assert _prose(narrow) == _prose(wide)  # ...and every word is still there
    for phase in ("train", "validation", "data_wait", "other"):
        assert re.search(rf"^{phase}\s", narrow, re.MULTILINE), phase
    _check_golden("input_bound_gpu_w60.txt", narrow)
    _check_golden("input_bound_gpu_w120.txt", wide)


def test_terminal_gets_styles_unless_no_color_is_set(tmp_path: Path) -> None:
    diagnosis = _diagnosis(_input_bound_gpu_run(tmp_path / "r.db"))

    def on_forced_terminal(**environ: str) -> str:
        out = io.StringIO()  # FORCE_COLOR makes rich treat it as a terminal
        render(diagnosis, make_console(out, environ={"FORCE_COLOR": "1", **environ}, width=100))
        return out.getvalue()

    assert ESCAPE in on_forced_terminal()
    assert ESCAPE in on_forced_terminal(NO_COLOR="")  # no-color.org: an empty value is unset
    plain = on_forced_terminal(NO_COLOR="1")
    assert ESCAPE not in plain
    assert plain == _rendered(diagnosis, 100)  # the same text as in a log file


def test_phase_names_are_text_not_markup(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=4, environment=GPU_OK_ENV)
    end = run.steps("[bold]fit[/bold]", 1, 10, 0.1)
    run.phase("[bold]fit[/bold]", 1, end)
    assert "[bold]fit[/bold]" in _rendered(_diagnosis(run), 80)


def test_several_gpus_give_their_range_in_the_verdict(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=10, devices=[H100, device(1)], environment=GPU_OK_ENV)
    end = run.steps("train", 1, 100, 0.08)
    run.phase("train", 1, end)
    run.gpu(0, 1, end, util_gpu_pct=95, job_memory_bytes=GiB)
    run.gpu(1, 1, end, util_gpu_pct=0)
    text = _rendered(_diagnosis(run), 100)
    assert "Verdict: 2 GPUs busy 0–95% of 'train' time; " in text


def test_verdict_of_a_clean_run_without_any_gpu_says_so(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=4, environment=GPU_OK_ENV)
    end = run.steps("train", 1, 20, 0.1)
    run.phase("train", 1, end)
    diagnosis = _diagnosis(run)
    assert diagnosis.findings == []
    assert verdict(diagnosis) == "No runtime problem found (no GPU use was recorded)"


def test_verdict_of_a_job_that_failed_before_its_first_step_says_so(tmp_path: Path) -> None:
    # A wrong flag: the job exits with 2 before it trains; "no problem found" would be a guess.
    run = Run(tmp_path / "r.db", duration_s=1.2, environment=GPU_OK_ENV)
    run.writer.set_meta("exit_code", 2)
    assert verdict(_diagnosis(run)) == (
        "The job exited with code 2 before its first step (its own output says why)"
    )
    # One that trained, then failed, is diagnosed on what it ran.
    trained = Run(tmp_path / "t.db", duration_s=4, environment=GPU_OK_ENV)
    end = trained.steps("train", 1, 20, 0.1)
    trained.phase("train", 1, end)
    trained.writer.set_meta("exit_code", 1)
    assert verdict(_diagnosis(trained)) == "No runtime problem found (no GPU use was recorded)"


def test_verdict_of_a_job_with_no_training_step_says_none_was_seen(tmp_path: Path) -> None:
    # `python -c ...`, a script that only loads data: "no problem found" would be a guess.
    plain = Run(tmp_path / "p.db", duration_s=2, environment=GPU_OK_ENV)
    assert verdict(_diagnosis(plain)) == (
        "No training step seen: the job used none of the frameworks gpuwhy watches "
        "(TensorFlow, Keras, PyTorch, JAX)"
    )
    # torch imported (its hooks said so), no loop gpuwhy knows.
    torch_only = Run(tmp_path / "t.db", duration_s=2, environment=GPU_OK_ENV)
    torch_only.event(0.1, "hooks", "torch hooks loaded", framework="torch")
    assert verdict(_diagnosis(torch_only)) == (
        "No training step seen in this torch job (a loop gpuwhy does not know can mark its "
        "steps: `gpuwhy.step()`)"
    )


def test_one_time_work_gets_its_own_line_under_the_table(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=6, command=["python", "train.py"])
    t = run.steps("train", 1.3, 1, 1.5)  # 0.3 s before the first step, a 1.5 s traced step
    end = run.steps("train", t, 100, 0.02, wait_s=0.01)
    run.phase("train", 1.0, end)
    text = " ".join(_rendered(_diagnosis(run), 120).split())  # wrapped lines joined
    assert (
        "One-time work (step and data-wait figures are of the steady steps): "
        "'train' 1.8 s (1 warm-up step 1.5 s, before the first step 300 ms)"
    ) in text
    healthy = _rendered(_diagnosis(_healthy_gpu_run(tmp_path / "h.db")), 120)
    assert "One-time work" not in healthy


def test_calls_that_traced_the_step_again_are_named_in_the_one_time_line(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=6, command=["python", "train.py"])
    end = run.steps("train", 1.0, 100, 0.04, pid=3)
    run.phase("train", 1.0, end)
    for index in range(10):  # ten calls of 40 ms that traced the step again for 30 ms
        at = 1.5 + 0.28 * index + 0.005
        run.event(at, "retrace", duration_ns=30_000_000, function="step", pid=3)
    text = " ".join(_rendered(_diagnosis(run), 120).split())
    assert "'train' 300 ms (10 calls that traced or compiled the step again 300 ms)" in text


def _ranked_run(path: Path, waits: list[float]) -> Run:
    """Ranks in lockstep on GPUs 0..n-1, each with its own input wait (as analysis/test_ranks)."""
    devices = [device(rank) for rank in range(len(waits))]
    run = Run(path, duration_s=10, devices=devices, environment=GPU_OK_ENV)
    cycle = max(waits) + 0.01
    for rank, wait in enumerate(waits):
        pid = 1000 + rank
        run.event(0.2, PROCESS_EVENT, "", pid=pid, ppid=1, launcher="torchrun", rank=rank,
                  world_size=len(waits), host=f"node-{rank // 8}")  # fmt: skip
        run.event(1.5, GPU_PROCESS_EVENT, "", pid=pid, device=rank, uuid=f"GPU-{rank}")
        run.steps("train", 1, 40, cycle - wait, wait_s=wait, pid=pid)
        run.gpu(rank, 1, 1 + 40 * cycle, util_gpu_pct=60, job_memory_bytes=GiB)
    run.phase("train", 1, 1 + 40 * cycle)
    return run


def test_golden_data_parallel_run_shows_a_row_per_rank(tmp_path: Path) -> None:
    text = _rendered(_diagnosis(_ranked_run(tmp_path / "r.db", [0.002, 0.030, 0.002])), 80)
    _check_layout(text, 80)
    assert "Per rank in 'train' (3 ranks)" in text
    _check_golden("data_parallel_w80.txt", text)


def test_a_large_jobs_table_keeps_the_ranks_that_wait_most(tmp_path: Path) -> None:
    waits = [0.002] * 40
    waits[33] = waits[17] = 0.030
    text = _rendered(_diagnosis(_ranked_run(tmp_path / "r.db", waits)), 100)
    _check_layout(text, 100)
    rows = [line.split()[1] for line in text.splitlines() if re.match(r"rank \d+ ", line)]
    assert len(rows) == RANK_ROWS_SHOWN and {"17", "33", "0"} <= set(rows)
    assert rows == sorted(rows, key=int)  # shown in rank order
    assert f"(+{40 - RANK_ROWS_SHOWN} more ranks: --json has every rank)" in text


def test_steps_of_tens_of_microseconds_read_in_microseconds(tmp_path: Path) -> None:
    # An asynchronous loop's steps are its dispatches: 40 µs reads "40 µs", not "0.0 ms".
    run = Run(tmp_path / "r.db", duration_s=3, command=["python", "train.py"])
    end = run.steps("train", 1.0, 200, 0.00004)
    run.phase("train", 1.0, end)
    diagnosis = _diagnosis(run)
    row = next(line for line in _rendered(diagnosis, 120).splitlines() if line.startswith("train"))
    assert "40 µs" in row and "0.0 ms" not in row


def _stalled_run(path: Path, stall_s: float, train_steps: int) -> Run:
    """A train phase of 10 ms steps, then an evaluation of 2 ms steps, one of which waits
    `stall_s` for its batch: a stall, the other steps waiting nothing."""
    run = Run(path, duration_s=1.0 + train_steps * 0.01 + 1.0, command=["python", "train.py"])
    end = run.steps("train", 1.0, train_steps, 0.01)
    run.phase("train", 1.0, end)
    t = run.steps("evaluate", end, 3, 0.002)
    t = run.steps("evaluate", t, 1, 0.002 + stall_s, wait_s=stall_s)
    t = run.steps("evaluate", t, 3, 0.002)
    run.phase("evaluate", end, t)
    return run


def test_a_stall_is_said_only_where_it_alone_held_input_bound_back(tmp_path: Path) -> None:
    heading = "A stall, not a slow input"
    # 0.3 s in one read of an evaluation beside 0.3 s of training: INPUT_BOUND but for the stall.
    text = " ".join(_rendered(_diagnosis(_stalled_run(tmp_path / "a.db", 0.3, 30)), 120).split())
    assert f"{heading} (it does not recur, so no INPUT_BOUND): 'evaluate' waited 300 ms" in text
    # 1 ms beside 1 s of training: no finding in any case, so nothing to explain.
    diagnosis = _diagnosis(_stalled_run(tmp_path / "b.db", 0.001, 100))
    assert (diagnosis.phases["evaluate"].data_wait_fraction or 0) >= 0.05  # a share, yet a sliver
    assert heading not in _rendered(diagnosis, 120)
