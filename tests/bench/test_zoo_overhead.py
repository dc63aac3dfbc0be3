"""bench/zoo_overhead.py: a one-pair run on a real zoo job writes its row, every figure a number;
bench/zoo_clock.py passes the job's exit code on; bad arguments are one line and exit 2. Nothing
is asserted about the costs themselves: single pairs on a shared machine swing by more."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT, assert_usage_error, framework_env

SCRIPT = ROOT / "bench" / "zoo_overhead.py"
CLOCK = ROOT / "bench" / "zoo_clock.py"
RATIO = re.compile(r"\d+\.\d{3} \[\d+\.\d{3}, \d+\.\d{3}\]")


@pytest.mark.parametrize(
    "args",
    [
        ["--pairs", "0"],
        ["--pairs", "many"],
        ["-k", "no such job", "--out", "rows.md"],
        ["-k", "GAN"],  # some jobs, and no --out: the committed table would lose the rest
        ["--out", str(ROOT / "bench")],
        ["--frobnicate"],
    ],
)
def test_bad_arguments_are_one_line(args: list[str]) -> None:
    assert_usage_error(SCRIPT, args)


def test_the_clock_times_the_script_and_keeps_its_exit_code(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text("import sys, time\ntime.sleep(0.2)\nprint(sys.argv[1:])\nsys.exit(3)\n")
    out = tmp_path / "clock.json"
    done = subprocess.run(
        [sys.executable, str(CLOCK), str(out), str(job), "a", "b"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3 and done.stdout == "['a', 'b']\n", done.stderr
    clocked = json.loads(out.read_text())
    assert 0.2 <= clocked["job_s"] < 5
    assert isinstance(clocked["full_gcs"], int) and clocked["full_gcs"] >= 0


def test_the_clock_counts_the_full_collections_the_job_ran(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text("import gc\nfor _ in range(3):\n    gc.collect()\n")
    counts = []
    for script in (job, tmp_path / "empty.py"):
        script.touch()
        out = tmp_path / f"{script.stem}.json"
        subprocess.run([sys.executable, str(CLOCK), str(out), str(script)], timeout=60, check=True)
        counts.append(json.loads(out.read_text())["full_gcs"])
    assert counts[0] == counts[1] + 3, counts


@pytest.mark.parametrize("interpreter", ["py310-jax", "py312-jax", "py313-jax"])
def test_a_job_that_names_its_python_runs_with_it(
    interpreter: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As tests/zoo runs it: its test environment's interpreter runs the job and the clock, bare
    # and under gpuwhy (whose own process is this interpreter); a plain member runs with this one.
    python = framework_env(interpreter)  # skips where scripts/test-envs.sh did not make it
    monkeypatch.syspath_prepend(str(ROOT / "bench"))  # the benches import their neighbours
    import zoo_overhead

    clock = tmp_path / "clock.json"
    members = [m for m in zoo_overhead.MEMBERS if m.interpreter == interpreter]
    plain = next(m for m in zoo_overhead.MEMBERS if not m.interpreter and m.launcher == "python")
    assert members
    for member in members:
        assert zoo_overhead._job(member, clock)[:3] == [str(python), str(CLOCK), str(clock)]
    assert zoo_overhead._job(plain, clock)[:2] == [sys.executable, str(CLOCK)]


@pytest.mark.slow
def test_one_pair_on_a_real_job_gives_its_row(tmp_path: Path) -> None:
    out = tmp_path / "zoo_overhead.md"
    name = "PyTorch MNIST example (train/test functions)"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--pairs", "1", "-k", name, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text()
    assert "Machine: " in text and "Date: " in text
    rows = [line for line in text.splitlines() if line.startswith(f"| {name} |")]
    assert len(rows) == 1, text
    cells = [cell.strip() for cell in rows[0].strip("|").split(" | ")]
    row = rows[0]
    _, launcher, bare_s, own, wall, added, collections, cpu = cells
    assert launcher == "python" and float(bare_s) > 0
    assert RATIO.fullmatch(own) and RATIO.fullmatch(wall), row
    assert re.fullmatch(r"[+-]\d+\.\d\d", added), row
    assert re.fullmatch(r"\d+(\.5)? / \d+(\.5)?", collections), row
    # the probe's CPU is '—' when the job ended before the probe did (a cold first run)
    assert re.fullmatch(r"\d+\.\d\d / (\d+\.\d\d|—)", cpu), row
