"""bench/hook_cost.py: a quick run measures every hook and every job, each number finite; bad
arguments are refused in one line with exit 2. Nothing is asserted about the costs themselves:
the machine is shared, and single rounds swing by more than the hooks cost."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT, assert_usage_error

sys.path.insert(0, str(ROOT / "bench"))
import machine

SCRIPT = ROOT / "bench" / "hook_cost.py"
HOOKS = (
    "timed_next",
    "begin_step",
    "count_sync",
    "DataLoader",
    "Dataset.range",
    "Keras callback",
    "tf.data wait stamps",
    # an iterator class's reads on this interpreter (before 3.12: through its patched `__next__`)
    "patched)" if sys.version_info < (3, 12) else "sys.monitoring)",
)
if sys.version_info < (3, 12):  # and a generator's, through a profile function on the thread
    HOOKS = (*HOOKS, "a profile function kept)")
# The generator and iterator class reads' hooks run where scripts/test-envs.sh found a Python
# 3.12 (the bench's default --python312); without one the bench says so in a note.
if machine.PY312.exists():
    HOOKS = (
        *HOOKS,
        "generator's read + `tracker.boundary` (a plain loop's step, Python 3.12)",
        "`__next__` + `tracker.boundary` (a plain loop's step, Python 3.12)",
    )
JOBS = ("PyTorch loop", "Keras `fit` on tensorflow")
NUMBER = re.compile(r"-?\d+(\.\d+)?")  # never nan or inf


def _tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every markdown table in `text`, as (header cells, rows of cells)."""
    tables: list[tuple[list[str], list[list[str]]]] = []
    lines = text.splitlines()
    for number, line in enumerate(lines[:-1]):
        if line.startswith("| ") and lines[number + 1].startswith("|---"):
            rows = []
            for row in lines[number + 2 :]:
                if not row.startswith("| "):
                    break
                rows.append(_cells(row))
            tables.append((_cells(line), rows))
    return tables


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split(" | ")]


def _check_numbers(header: list[str], row: list[str]) -> None:
    """Every cell after the label is a number (or a range of two); times and ratios above 0,
    delivery at least 0, differences any sign."""
    for title, cell in zip(header[1:], row[1:], strict=True):
        for value in cell.split(" – "):
            assert NUMBER.fullmatch(value), f"{row[0]}: {title} = {cell!r}"
            if "−" in title:
                continue
            assert float(value) >= 0 if title.startswith("delivery") else float(value) > 0, (
                f"{row[0]}: {title} = {cell!r}"
            )


@pytest.mark.slow
def test_a_quick_run_measures_every_hook_and_job(tmp_path: Path) -> None:
    out = tmp_path / "hook_cost.md"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (hook_header, hooks), (job_header, jobs) = _tables(done.stdout)
    for table, expected in ((hooks, HOOKS), (jobs, JOBS)):
        labels = [row[0] for row in table]
        assert len(labels) == len(expected), labels
        assert all(sum(word in label for label in labels) == 1 for word in expected), labels
    for header, rows in ((hook_header, hooks), (job_header, jobs)):
        for row in rows:
            _check_numbers(header, row)
    written = out.read_text(encoding="utf-8")
    assert written.startswith("# ") and "Date: " in written and "Machine: " in written
    assert [table for _, table in _tables(written)] == [hooks, jobs]


@pytest.mark.parametrize(
    "args",
    [
        ["--pairs", "0"],
        ["--pairs", "-2"],
        ["--pairs", "many"],
        ["--pairs", "1001"],
        ["--out", str(ROOT)],  # a folder
        ["--child", "nothing"],
        ["--no-such-flag"],
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args: list[str]) -> None:
    assert_usage_error(SCRIPT, args)
