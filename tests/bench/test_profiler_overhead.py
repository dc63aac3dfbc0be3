"""bench/profiler_overhead.py refuses, in one line and with exit 2, every argument combination
that cannot run, before any training starts (none runs here)."""

from __future__ import annotations

import pytest

from support import ROOT, assert_usage_error

BENCH = ROOT / "bench"
SCRIPT = BENCH / "profiler_overhead.py"


@pytest.mark.parametrize(
    "args",
    [
        ["--rounds", "0"],  # the medians of no round
        ["--batches", "0"],
        ["--batches", "100000"],  # 13 GB of data built in memory
        ["--epochs", "1"],  # no second epoch to profile
        [
            "--first",
            "0",
            "--last",
            "500",
        ],  # a window past the trained batches: its clock never read
        ["--first", "200"],
        ["--first", "-1"],
        ["--rounds", "many"],
        ["--out", str(ROOT)],  # a folder
        ["--out", str(SCRIPT / "results.md")],  # under a file
        ["--job", "bare"],  # the internal job mode needs the folder its profilers write to
        ["--no-such-flag"],
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args: list[str]) -> None:
    assert_usage_error(SCRIPT, args)


def test_five_batches_per_epoch_give_a_window_inside_the_training(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))  # the benches import their neighbours by name
    import profiler_overhead

    args, first, last = profiler_overhead._parse(["--batches", "5"])
    assert (args.batches, args.epochs, first, last) == (5, 3, 5, 14)  # epochs 2 and 3
