"""`gpuwhy report REC [--json]` end to end on recordings made by a real `gpuwhy run`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpuwhy.recording.reader import Recording
from support import format_1_file

SRC = Path(__file__).resolve().parents[1] / "src"
SCHEMA = SRC / "gpuwhy" / "schemas" / "report.schema.json"
PY = sys.executable


def _job_python() -> str:
    """The bare test environment where it exists: its probe by `run` answers fastest."""
    root = os.environ.get("GPUWHY_TEST_ENVS")
    if root and Path(root, "bare", ".done").exists():
        return str(Path(root, "bare", "bin", "python"))
    return sys.executable


JOB_PY = _job_python()


def gpuwhy(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    return subprocess.run(
        [PY, "-m", "gpuwhy", *args], cwd=cwd, env=env, capture_output=True, timeout=120
    )


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("rec")
    path = folder / "r.gpuwhy.db"
    code = "import time; time.sleep(0.5)"
    result = gpuwhy(["run", "--quiet", "--record", str(path), "--", JOB_PY, "-c", code], folder)
    assert result.returncode == 0, result.stderr
    return path


def test_report_on_a_recording(recording: Path, tmp_path: Path) -> None:
    result = gpuwhy(["report", str(recording)], tmp_path)
    assert result.returncode in (0, 1), result.stderr
    assert result.stdout.strip()
    assert b"Traceback" not in result.stderr


def test_json_report_follows_the_schema(recording: Path, tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    result = gpuwhy(["report", str(recording), "--json"], tmp_path)
    assert result.returncode in (0, 1), result.stderr
    document = json.loads(result.stdout)
    jsonschema.validate(document, json.loads(SCHEMA.read_text()))


def _one_line_exit_2(result: subprocess.CompletedProcess[bytes], fragment: str) -> None:
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert stderr.count("\n") == 1 and stderr.startswith("gpuwhy: ") and fragment in stderr
    assert result.stdout == b""


def test_missing_file(tmp_path: Path) -> None:
    _one_line_exit_2(gpuwhy(["report", str(tmp_path / "nope.gpuwhy.db")], tmp_path), "no recording")


def test_truncated_file(recording: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gpuwhy.db"
    data = recording.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    _one_line_exit_2(gpuwhy(["report", str(cut)], tmp_path), "truncated")


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_foreign_files(tmp_path: Path, json_flag: list[str]) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello\n" * 100)
    _one_line_exit_2(gpuwhy(["report", str(text), *json_flag], tmp_path), "not a gpuwhy recording")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    _one_line_exit_2(gpuwhy(["report", str(other), *json_flag], tmp_path), "not a gpuwhy recording")


def test_a_format_1_recording_is_refused(tmp_path: Path) -> None:
    old = tmp_path / "old.gpuwhy.db"
    format_1_file(old)
    _one_line_exit_2(gpuwhy(["report", str(old)], tmp_path), "older gpuwhy (recording format 1")


def test_report_on_a_run_whose_gpuwhy_was_killed(tmp_path: Path) -> None:
    # kill -9 of gpuwhy itself: the recording stays readable up to the last commit (≤ 1 s).
    path, socket_file = tmp_path / "killed.gpuwhy.db", tmp_path / "socket"
    code = (
        "import os, sys, time\n"
        "open(sys.argv[1], 'w').write(os.environ['GPUWHY_SOCKET'])\n"
        "time.sleep(30)\n"
    )
    process = subprocess.Popen(
        [
            PY,
            "-m",
            "gpuwhy",
            "run",
            "--quiet",
            "--record",
            str(path),
            "--",
            JOB_PY,
            "-c",
            code,
            str(socket_file),
        ],
        env=dict(os.environ, PYTHONPATH=str(SRC)),
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not socket_file.exists() or not socket_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(1.5)  # past the writer's first commit
    os.killpg(process.pid, signal.SIGKILL)  # gpuwhy and its job, as a crashed session would
    process.wait(timeout=30)
    # A killed gpuwhy cannot remove its socket folder; do it for it.
    shutil.rmtree(Path(socket_file.read_text()).parent)
    with Recording.open(path) as recording:
        assert not recording.complete
        assert recording.meta["command"][0] == JOB_PY
    result = gpuwhy(["report", str(path)], tmp_path)
    assert result.returncode in (0, 1), result.stderr
    assert result.stdout.strip()


def test_html_report_is_one_self_contained_page(recording: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    result = gpuwhy(["report", str(recording), "--html", str(page)], tmp_path)
    assert result.returncode in (0, 1), result.stderr
    text = page.read_text()
    assert text.lstrip().lower().startswith("<!doctype html")
    assert "NO_DRIVER" in text or "NO_GPU" in text  # this machine's environment finding
    assert "http://" not in text.replace("http://www.w3.org", "")  # nothing fetched


def test_html_to_an_unwritable_place_is_one_line_and_exit_2(
    recording: Path, tmp_path: Path
) -> None:
    result = gpuwhy(["report", str(recording), "--html", str(tmp_path / "no" / "x.html")], tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.decode().strip().splitlines()) == 1
    assert b"Traceback" not in result.stderr


def test_run_writes_html_beside_the_recording_and_keeps_the_exit_code(tmp_path: Path) -> None:
    page = tmp_path / "run.html"
    result = gpuwhy(
        ["run", "--quiet", "--html", str(page), "--", JOB_PY, "-c", "raise SystemExit(5)"],
        tmp_path,
    )
    assert result.returncode == 5, result.stderr
    assert page.stat().st_size > 1000


@pytest.mark.slow
def test_run_ends_with_a_report_drawn_by_workers(tmp_path: Path) -> None:
    """`gpuwhy run` reads its recording back with workers (asked for: the job is short): the
    job's exit code, and the page `gpuwhy report` draws alone from the same recording."""
    record, page, alone = tmp_path / "r.gpuwhy.db", tmp_path / "run.html", tmp_path / "a.html"
    env = dict(os.environ, PYTHONPATH=str(SRC), GPUWHY_WORKERS="2")
    job = [JOB_PY, "-c", "import time; time.sleep(0.3); raise SystemExit(5)"]
    run = ["run", "--quiet", "--record", str(record), "--html", str(page), "--", *job]
    result = subprocess.run(
        [PY, "-m", "gpuwhy", *run],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )
    assert result.returncode == 5, result.stderr
    assert b"Traceback" not in result.stderr
    again = gpuwhy(["report", str(record), "--html", str(alone)], tmp_path)
    assert again.returncode == 0, again.stderr
    assert page.read_bytes() == alone.read_bytes()


def test_run_names_the_html_page_it_wrote(tmp_path: Path) -> None:
    result = gpuwhy(["run", "--html", "page.html", "--", JOB_PY, "-c", "pass"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "page.html").stat().st_size > 1000
    assert b"gpuwhy: HTML report written to page.html (open it in a browser)\n" in result.stderr


def test_report_text_has_no_trailing_blanks_and_respects_no_color(tmp_path: Path) -> None:
    recording = (
        Path(__file__).resolve().parent
        / "data"
        / "recordings"
        / ("cpu-keras-tf-slow-map.gpuwhy.db")
    )
    env = dict(os.environ, PYTHONPATH=str(SRC), FORCE_COLOR="1", COLUMNS="90")
    styled = subprocess.run(
        [PY, "-m", "gpuwhy", "report", str(recording)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=120,
    )
    plain = subprocess.run(
        [PY, "-m", "gpuwhy", "report", str(recording)],
        cwd=tmp_path,
        env={**env, "NO_COLOR": "1"},
        capture_output=True,
        timeout=120,
    )
    assert b"\x1b[" in styled.stdout  # FORCE_COLOR: styled as on a terminal
    assert b"\x1b[" not in plain.stdout
    lines = plain.stdout.decode().splitlines()
    assert lines and all(len(line) <= 90 and line == line.rstrip() for line in lines)


def test_several_recordings_with_a_bad_one_are_one_line(recording: Path, tmp_path: Path) -> None:
    """A job's node recordings: a name that is no file, a folder without recordings, or a
    file that is not a recording stops the report with one line (exit 2), nothing on stdout."""
    empty = tmp_path / "empty"
    empty.mkdir()
    text = tmp_path / "notes.txt"
    text.write_text("hello\n" * 100)
    _one_line_exit_2(
        gpuwhy(["report", str(recording), str(tmp_path / "nope.gpuwhy.db")], tmp_path),
        "no such file",
    )
    _one_line_exit_2(gpuwhy(["report", str(recording), str(empty)], tmp_path), "holds no recording")
    _one_line_exit_2(gpuwhy(["report", str(recording), str(text)], tmp_path), "notes.txt")


@pytest.mark.slow
def test_a_report_drawn_by_workers_is_the_report_drawn_alone(tmp_path: Path) -> None:
    """`python -m gpuwhy report` with worker processes (analysis/workers.py): the same bytes, in
    the terminal, JSON and HTML, as one process gives."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from support.synth import synthesize

    path = tmp_path / "day.gpuwhy.db"
    synthesize(path, hours=1 / 3, gpus=4, seed=11)
    outputs = {}
    for workers in ("2", "0"):
        env = dict(os.environ, PYTHONPATH=str(SRC), GPUWHY_WORKERS=workers, NO_COLOR="1")
        page = tmp_path / f"page-{workers}.html"
        runs = [
            subprocess.run(
                [PY, "-m", "gpuwhy", "report", str(path), *extra],
                env=env,
                capture_output=True,
                timeout=120,
                cwd=tmp_path,
            )
            for extra in ([], ["--json"], ["--html", str(page)])
        ]
        assert all(r.returncode == 0 and not r.stderr for r in runs), [r.stderr for r in runs]
        outputs[workers] = [r.stdout for r in runs] + [page.read_bytes()]
    assert outputs["2"] == outputs["0"]
    assert b"train" in outputs["2"][0] and b"GPU 3" in outputs["2"][3]


def _session_members(session: int) -> list[int]:
    """Processes still alive in a session (from /proc: pid, then session id at field 6)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_ctrl_c_stops_a_report_and_its_workers_with_one_line(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) at any moment of a
    report drawn by workers: exit 130, one line, no traceback from a worker, none left."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from support.synth import synthesize

    path = tmp_path / "run.gpuwhy.db"
    synthesize(path, hours=1, gpus=4, seed=5)
    env = dict(os.environ, PYTHONPATH=str(SRC), GPUWHY_WORKERS="2")
    command = [PY, "-m", "gpuwhy", "report", str(path), "--html", str(tmp_path / "p.html")]
    interrupted = 0
    for delay_s in (0.0, 0.05, 0.1, 0.2, 0.3, 0.45):
        child = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        # From the workers' start on (gpuwhy's own imports, before, are not this test's).
        deadline = time.monotonic() + 30
        while len(_session_members(child.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(delay_s)
        with contextlib.suppress(ProcessLookupError):  # already done
            os.killpg(child.pid, signal.SIGINT)
        _, err = child.communicate(timeout=60)
        if child.returncode == 130:
            interrupted += 1
            assert err == b"gpuwhy: interrupted\n", (delay_s, err.decode()[-800:])
        else:
            assert child.returncode == 0 and not err, (delay_s, child.returncode, err)
        deadline = time.monotonic() + 5
        while _session_members(child.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _session_members(child.pid), f"workers left running after {delay_s} s"
    assert interrupted >= 3  # most delays fall inside the report
