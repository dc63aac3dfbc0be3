"""bench/hook_instructions.py: its child runs the short-step PyTorch loop bare and hooked with
today's hooks (what valgrind counts), and hooked with a `--profile` window armed, which the bench
places after the counted steps (the same environment opens one where the steps reach it), and bad
arguments, or no valgrind, are refused in one line with exit 2. The counting itself takes minutes
under valgrind and is the bench's to run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT, assert_usage_error

SCRIPT = ROOT / "bench" / "hook_instructions.py"


@pytest.mark.parametrize("hooked", ["0", "1"])
def test_the_child_trains_the_loop_valgrind_counts(hooked: str) -> None:
    pytest.importorskip("torch")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--child", "torch", "--child-steps", "5", "--hooked", hooked],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src"), GPUWHY_BOOT="0"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def _child(steps: int, extra_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--child", "torch", "--child-steps", str(steps),
         "--hooked", "1"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src"), GPUWHY_BOOT="0", **extra_env),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_the_armed_child_trains_the_loop_and_its_window_never_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(ROOT / "bench"))  # the benches import their neighbours
    import hook_instructions

    steps = (3, 8)
    # The bench's window is armed: where the steps reach it, the same environment opens it...
    reached = tmp_path / "reached"
    _child(steps[1] + 8, hook_instructions.armed(hook_instructions.never_opens(steps), reached))
    assert list(reached.glob("*.pt.trace.json"))
    # ...and in the runs it counts, it never does.
    for n in steps:
        never = tmp_path / f"never{n}"
        _child(n, hook_instructions.armed(hook_instructions.never_opens(steps), never))
        assert not never.exists()


@pytest.mark.parametrize(
    "args",
    [["--steps", "1100", "100"], ["--steps", "0", "5"], ["--repeat", "0"], ["--jobs", "tf"]],
)
def test_bad_arguments_are_refused_in_one_line(args: list[str]) -> None:
    assert_usage_error(SCRIPT, args)


def test_without_valgrind_it_says_how_to_get_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60,
        env=dict(os.environ, PATH=str(tmp_path)),
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("hook_instructions.py: valgrind not found: install it")
    assert done.stderr.count("\n") == 1
