"""bench/profiler_overhead.py refuses, in one line and with exit 2, every argument combination
that cannot run, before any training starts; a round at the smallest settings measures every
variant, `gpuwhy run --profile` included, each figure a positive number. Nothing is asserted
about the costs themselves: the machine is shared, and one round swings by more than they do."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT, assert_usage_error

BENCH = ROOT / "bench"
SCRIPT = BENCH / "profiler_overhead.py"
VARIANTS = ("bare", "gpuwhy", "gpuwhy-bare", "gpuwhy-profile", "tensorboard", "tf-profiler")
NUMBER = r"(\d+\.\d+) \((\d+\.\d+)–(\d+\.\d+)\)"  # a median (its range over rounds)


@pytest.mark.parametrize(
    "args",
    [
        ["--rounds", "0"],  # the medians of no round
        ["--batches", "0"],
        ["--batches", "100000"],  # 13 GB of data built in memory
        ["--epochs", "1"],  # no epoch after the window's
        [
            "--first",
            "10",
            "--last",
            "500",
        ],  # a window past the trained batches: its clock never read
        ["--first", "200"],  # gpuwhy run --profile cannot start its window there
        ["--first", "-1"],
        ["--last", "11"],  # no step for --profile between its warm-up and its stop
        ["--batches", "200", "--last", "150"],  # more steps than --profile takes
        ["--rounds", "many"],
        ["--out", str(ROOT)],  # a folder
        ["--out", str(SCRIPT / "results.md")],  # under a file
        ["--job", "bare"],  # the internal job mode needs the folder its profilers write to
        ["--no-such-flag"],
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args: list[str]) -> None:
    assert_usage_error(SCRIPT, args)


@pytest.mark.parametrize(
    ("batches", "window"),
    [
        ("60", (10, 59)),  # the rest of the first epoch
        ("5", (10, 14)),  # the third epoch
        ("200", (10, 111)),  # as many steps as --profile takes: 100
    ],
)
def test_the_window_is_where_gpuwhy_run_profile_puts_its_own(
    monkeypatch: pytest.MonkeyPatch, batches: str, window: tuple[int, int]
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))  # the benches import their neighbours by name
    import profiler_overhead

    from gpuwhy.cli.run import MAX_PROFILE_STEPS, PROFILE_SKIP

    args, first, last = profiler_overhead._parse(["--batches", batches])
    assert (first, last) == window
    assert first == PROFILE_SKIP and 1 <= last - first - 1 <= MAX_PROFILE_STEPS
    assert last < args.batches * args.epochs


@pytest.mark.slow
def test_one_small_round_measures_every_variant(tmp_path: Path) -> None:
    out = tmp_path / "profiler_overhead.md"
    smallest = ["--rounds", "1", "--batches", "5", "--epochs", "4"]  # the window: the third epoch
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *smallest, "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    written = out.read_text(encoding="utf-8")
    assert "gpuwhy run --profile 3" in written  # batch 10 warms it up, 11..13, 14 stops it
    lines = written.splitlines()
    table = lines.index(next(line for line in lines if line.startswith("| variant |")))
    rows: dict[str, list[str]] = {}
    for line in lines[table + 2 :]:  # the variants' table, after its header and rule
        if not line.startswith("| "):
            break
        label, *cells = (cell.strip() for cell in line.strip("|").split(" | "))
        rows[label] = cells
    assert tuple(rows) == VARIANTS
    for variant, cells in rows.items():
        assert len(cells) == 8, (variant, cells)
        assert all(float(cell) > 0 for cell in cells), (variant, cells)
    outside = re.search(r"the batches' total time " + NUMBER, written)
    outside_p50 = re.search(r"their median batch " + NUMBER, written)
    inside = re.search(r"gpuwhy-profile / tf-profiler " + NUMBER, written)
    printed = re.search(r"a step inside over a step outside " + NUMBER, written)
    for found in (outside, outside_p50, inside, printed):
        assert found is not None, written
        assert all(float(value) > 0 for value in found.groups()), found.group(0)
