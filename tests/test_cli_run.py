"""`gpuwhy run` end to end: real subprocesses, real signals, real recordings, a real pty."""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpuwhy.model import SpanKind
from gpuwhy.recording.reader import Recording
from support import framework_env

SRC = Path(__file__).resolve().parents[1] / "src"


def _job_python() -> str:
    """The interpreter the jobs under test run with.

    The bare test environment where it exists: `run` probes the job's interpreter, and one
    without frameworks answers in well under a second, where the full one takes seconds of CPU.
    """
    root = os.environ.get("GPUWHY_TEST_ENVS")
    if root and Path(root, "bare", ".done").exists():
        return str(Path(root, "bare", "bin", "python"))
    return sys.executable


PY = _job_python()


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def gpuwhy(
    args: Sequence[str], cwd: Path, *, input: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "gpuwhy", *args],
        cwd=cwd,
        env=_env(),
        input=input,
        capture_output=True,
        timeout=timeout,
        start_new_session=True,  # no controlling terminal, like a batch job
    )


def start_gpuwhy(args: Sequence[str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpuwhy", *args],
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def wait_for(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def events(rec: Path) -> list[tuple[str, str]]:
    with Recording.open(rec) as recording:
        return [(event.kind, event.message) for event in recording.events()]


# -- exit codes and pass-through ---------------------------------------------------------------


def test_exit_code_and_output_pass_through_untouched(tmp_path: Path) -> None:
    rec = tmp_path / "r.gpuwhy.db"
    code = (
        "import sys\n"
        "data = sys.stdin.read()\n"
        "sys.stdout.write('out:' + data)\n"
        "sys.stderr.write('err line\\n')\n"
        "sys.exit(3)\n"
    )
    result = gpuwhy(["run", "--record", str(rec), "--", PY, "-c", code], tmp_path, input=b"abc\n")
    assert result.returncode == 3
    assert result.stdout == b"out:abc\n"  # gpuwhy itself writes nothing to stdout
    assert result.stderr.startswith(b"gpuwhy: recording to ")
    assert b"err line\n" in result.stderr
    with Recording.open(rec) as recording:
        assert recording.complete
        assert recording.meta["exit_code"] == 3
        assert recording.meta["command"] == [PY, "-c", code]
        assert recording.meta["python"] == PY
        assert recording.meta["interval_s"] == 0.1
        assert recording.meta["end_ns"] > recording.meta["start_ns"]
        # gpuwhy's own CPU: its process's, and the probe's when the probe delivered.
        cost = recording.meta["gpuwhy_cost"]
        assert 0 < cost["recorder_cpu_s"] < 60
        probed = "environment" in recording.meta
        assert (cost["probe_cpu_s"] > 0) if probed else cost["probe_cpu_s"] is None
        kinds = [event.kind for event in recording.events()]
    assert kinds.index("child_started") < kinds.index("child_exited")


def test_killed_child_gives_128_plus_signal(tmp_path: Path) -> None:
    rec = tmp_path / "r.gpuwhy.db"
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    result = gpuwhy(["run", "--quiet", "--record", str(rec), "--", PY, "-c", code], tmp_path)
    assert result.returncode == 137
    with Recording.open(rec) as recording:
        assert recording.complete and recording.meta["exit_code"] == 137


def test_crashing_child_leaves_a_complete_recording_and_a_report(tmp_path: Path) -> None:
    rec = tmp_path / "r.gpuwhy.db"
    code = "raise RuntimeError('training diverged')"
    result = gpuwhy(["run", "--record", str(rec), "--", PY, "-c", code], tmp_path)
    assert result.returncode == 1
    stderr = result.stderr.decode()
    assert "RuntimeError: training diverged" in stderr
    assert f"recording saved to {rec}" in stderr
    assert "Traceback" in stderr  # the child's own traceback, passed through
    assert stderr.count("Traceback") == 1  # ...and none of gpuwhy's
    with Recording.open(rec) as recording:
        assert recording.complete and recording.meta["exit_code"] == 1
    report = gpuwhy(["report", str(rec)], tmp_path)
    assert report.returncode in (0, 1) and report.stdout


def test_command_not_found_is_127_in_one_line_and_creates_nothing(tmp_path: Path) -> None:
    result = gpuwhy(["run", "--", "no-such-command-gpuwhy", "x"], tmp_path)
    assert result.returncode == 127
    assert result.stderr == b"gpuwhy: no-such-command-gpuwhy: command not found\n"
    assert list(tmp_path.iterdir()) == []


def test_not_executable_is_126(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    result = gpuwhy(["run", "--", str(script)], tmp_path)
    assert result.returncode == 126
    assert result.stderr.decode().count("\n") == 1 and "not executable" in result.stderr.decode()


def test_existing_record_file_is_never_overwritten(tmp_path: Path) -> None:
    rec = tmp_path / "old.gpuwhy.db"
    rec.write_bytes(b"precious")
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').close()"
    result = gpuwhy(["run", "--record", str(rec), "--", PY, "-c", code], tmp_path)
    assert result.returncode == 2
    assert result.stderr.decode().count("\n") == 1 and "already exists" in result.stderr.decode()
    assert rec.read_bytes() == b"precious"
    assert not marker.exists()  # the job did not start


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run"], "no command given"),
        (["run", "--"], "no command given"),
        (["run", "--interval", "0", "--", "true"], "out of range"),
        (["run", "--interval", "nan", "--", "true"], "out of range"),
        (["run", "--record", "missing/dir/r.db", "--", "true"], "does not exist"),
        (["run", "--json", "missing/dir/r.json", "--", "true"], "does not exist"),
    ],
)
def test_usage_errors_exit_2_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = gpuwhy(args, tmp_path)
    assert result.returncode == 2
    assert result.stderr.decode().count("\n") == 1 and message in result.stderr.decode()
    assert list(tmp_path.iterdir()) == []


def test_default_recording_path_keeps_runs_apart(tmp_path: Path) -> None:
    first = gpuwhy(["run", "--quiet", "--", PY, "-c", "pass"], tmp_path)
    second = gpuwhy(["run", "--quiet", "--", PY, "-c", "pass"], tmp_path)
    assert first.returncode == second.returncode == 0
    recordings = sorted((tmp_path / "gpuwhy-runs").iterdir())
    assert len(recordings) == 2
    assert all(path.name.endswith(".gpuwhy.db") for path in recordings)
    # --quiet: no summary, but the user still learns where the recording went.
    assert first.stderr.decode().startswith("gpuwhy: recording saved to gpuwhy-runs/")
    assert first.stderr.decode().count("\n") == 1


def test_runs_started_at_once_in_one_folder_each_keep_their_recording(tmp_path: Path) -> None:
    # A sweep launching its jobs together: the default names collide within the second.
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "gpuwhy", "run", "--quiet", "--", PY, "-c", "pass"],
            cwd=tmp_path,
            env=_env(),
            stderr=subprocess.PIPE,
        )
        for _ in range(3)
    ]
    errors = [run.communicate(timeout=60)[1].decode() for run in runs]
    assert [run.returncode for run in runs] == [0, 0, 0], errors
    saved = {line.split("recording saved to ")[1].split()[0] for line in errors}
    assert len(saved) == 3
    assert {f"gpuwhy-runs/{p.name}" for p in (tmp_path / "gpuwhy-runs").iterdir()} == saved


def test_a_run_refused_after_its_name_was_picked_leaves_no_file(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = gpuwhy(["run", "--metrics", str(port), "--", PY, "-c", "pass"], tmp_path)
    assert result.returncode == 2 and b"cannot serve metrics" in result.stderr
    assert list((tmp_path / "gpuwhy-runs").iterdir()) == []


def test_a_recordings_folder_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "gpuwhy-runs").write_text("not a folder")
    result = gpuwhy(["run", "--", PY, "-c", "print('ran')"], tmp_path)
    err = result.stderr.decode()
    assert result.returncode == 2 and err.count("\n") == 1, err
    assert "cannot create a recording in gpuwhy-runs/: it is a file" in err
    assert result.stdout == b""  # the job never started


def test_a_command_not_found_leaves_no_file_in_the_record_folder(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    result = gpuwhy(["run", "--record", "runs/", "--", "no-such-command-here"], tmp_path)
    assert result.returncode == 127
    assert list((tmp_path / "runs").iterdir()) == []


def test_options_after_the_command_belong_to_the_command(tmp_path: Path) -> None:
    rec = tmp_path / "r.gpuwhy.db"
    code = "import sys; print(sys.argv[1:])"
    result = gpuwhy(
        ["run", "--quiet", "--record", str(rec), PY, "-c", code, "--quiet", "--record", "x"],
        tmp_path,
    )
    assert result.returncode == 0
    assert result.stdout == b"['--quiet', '--record', 'x']\n"


# -- signals -----------------------------------------------------------------------------------

_HANDLER = """
import signal, sys, time
def handler(signum, frame):
    open(sys.argv[2], "w").write(signal.Signals(signum).name)
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)
signal.signal(getattr(signal, sys.argv[1]), handler)
open(sys.argv[3], "w").close()
time.sleep(60)
"""


@pytest.mark.parametrize(("name", "code"), [("SIGTERM", 143), ("SIGHUP", 129), ("SIGINT", 130)])
def test_signal_to_gpuwhy_reaches_the_child_and_the_recording_is_complete(
    tmp_path: Path, name: str, code: int
) -> None:
    # No controlling terminal here, so SIGINT too is forwarded (the terminal did not send it).
    rec, marker, ready = tmp_path / "r.gpuwhy.db", tmp_path / "marker", tmp_path / "ready"
    process = start_gpuwhy(
        ["run", "--record", str(rec), "--", PY, "-c", _HANDLER, name, str(marker), str(ready)],
        tmp_path,
    )
    wait_for(ready)
    process.send_signal(getattr(signal, name))
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == code, stderr
    assert marker.read_text() == name
    with Recording.open(rec) as recording:
        assert recording.complete and recording.meta["exit_code"] == code
    assert ("signal", f"{name}: forwarded") in events(rec)


def test_second_interrupt_sends_sigterm(tmp_path: Path) -> None:
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGINT, lambda *a: open(sys.argv[1], 'a').write('INT '))\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(open(sys.argv[1], 'a').write('TERM')))\n"
        "open(sys.argv[2], 'w').close()\n"
        "time.sleep(60)\n"
    )
    rec, marker, ready = tmp_path / "r.gpuwhy.db", tmp_path / "marker", tmp_path / "ready"
    process = start_gpuwhy(
        ["run", "--record", str(rec), "--", PY, "-c", code, str(marker), str(ready)], tmp_path
    )
    wait_for(ready)
    process.send_signal(signal.SIGINT)
    wait_for(marker)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 4, stderr  # sys.exit(len("TERM"))
    assert marker.read_text() == "INT TERM"
    assert b"Ctrl-C again sends it SIGTERM" in stderr


# -- spans from the job ------------------------------------------------------------------------

_WORKER = """
import os, socket, sys
from gpuwhy.model import Span, SpanKind
from gpuwhy.wire import encode
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(os.environ["GPUWHY_SOCKET"])
for i in range(200):
    sock.sendall(encode(Span("rank", SpanKind.STEP, i, i + 1, step=i, pid=os.getpid())))
"""

_LAUNCHER = """
import subprocess, sys
workers = [subprocess.Popen([sys.executable, "-c", sys.argv[1]]) for _ in range(4)]
sys.exit(sum(worker.wait() for worker in workers))
"""


def test_spans_from_several_processes_of_the_job_are_recorded(tmp_path: Path) -> None:
    rec = tmp_path / "r.gpuwhy.db"
    result = gpuwhy(
        ["run", "--quiet", "--record", str(rec), "--", PY, "-c", _LAUNCHER, _WORKER], tmp_path
    )
    assert result.returncode == 0, result.stderr
    with Recording.open(rec) as recording:
        spans = list(recording.spans(kind=SpanKind.STEP, phase="rank"))
        hooks = recording.meta["hooks"]
    by_pid: dict[int | None, list[int | None]] = {}
    for span in spans:
        by_pid.setdefault(span.pid, []).append(span.step)
    assert len(by_pid) == 4
    assert all(sorted(steps) == list(range(200)) for steps in by_pid.values())  # type: ignore[type-var]
    assert hooks["malformed"] == 0 and hooks["connections"] >= 4


# -- the live line -----------------------------------------------------------------------------

# Makes the pty the controlling terminal of a new session, then runs the command: a terminal
# session as a user has it, without preexec_fn.
_ON_TERMINAL = (
    "import fcntl, os, sys, termios\n"
    "os.setsid()\n"
    "fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])\n"
)


def run_on_pty(
    args: Sequence[str], cwd: Path, *, send: bytes = b"", after: Path | None = None
) -> tuple[int, bytes]:
    """Run gpuwhy with a pty as stdin/stdout/stderr and controlling terminal; (code, output)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-c", _ON_TERMINAL, sys.executable, "-m", "gpuwhy", *args],
        cwd=cwd,
        env=_env(TERM="xterm"),
        stdin=slave,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    output = bytearray()
    sent = not send
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not sent and after is not None and after.exists():
            os.write(master, send)
            sent = True
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every process holding the terminal has ended
                break
            if not chunk:
                break
            output += chunk
        elif process.poll() is not None:
            break
    os.close(master)
    return process.wait(timeout=30), bytes(output)


def test_live_line_on_a_terminal(tmp_path: Path) -> None:
    rec = tmp_path / "r.gpuwhy.db"
    code, output = run_on_pty(
        ["run", "--record", str(rec), "--", PY, "-c", "import time; time.sleep(2.2)"], tmp_path
    )
    assert code == 0, output
    text = output.decode(errors="replace")
    assert text.count("\r\x1b[Kgpuwhy 0:0") >= 2  # redrawn in place, about twice a second
    assert "\r\x1b[K" in text.split("recording saved")[0].rsplit("gpuwhy 0:0", 1)[1]  # erased
    assert "gpuwhy summary" in text or "GPU" in text


def test_no_live_line_when_quiet_or_not_a_terminal(tmp_path: Path) -> None:
    sleep = [PY, "-c", "import time; time.sleep(1.2)"]
    quiet = ["run", "--quiet", "--record", str(tmp_path / "a.db"), *sleep]
    code, output = run_on_pty(quiet, tmp_path)
    assert code == 0 and b"\x1b[K" not in output
    result = gpuwhy(["run", "--record", str(tmp_path / "b.db"), "--", *sleep], tmp_path)
    assert result.returncode == 0 and b"\x1b[K" not in result.stderr


def test_ctrl_c_on_the_terminal_reaches_the_child_once(tmp_path: Path) -> None:
    # The terminal sends SIGINT to the whole foreground group: gpuwhy must not add a second one.
    ready, count = tmp_path / "ready", tmp_path / "count"
    code = (
        "import signal, sys, time\n"
        "hits = []\n"
        "signal.signal(signal.SIGINT, lambda *a: hits.append(1))\n"
        "open(sys.argv[1], 'w').close()\n"
        "deadline = time.monotonic() + 60\n"
        "while not hits and time.monotonic() < deadline: time.sleep(0.01)\n"
        "time.sleep(1.0)\n"
        "open(sys.argv[2], 'w').write(str(len(hits)))\n"
        "sys.exit(5)\n"
    )
    exit_code, output = run_on_pty(
        [
            "run",
            "--quiet",
            "--record",
            str(tmp_path / "r.db"),
            "--",
            PY,
            "-c",
            code,
            str(ready),
            str(count),
        ],
        tmp_path,
        send=b"\x03",
        after=ready,
    )
    assert exit_code == 5, output
    assert count.read_text() == "1"
    assert b"waiting for the command to end" in output
    assert ("signal", "SIGINT: delivered by the terminal; waiting for the command") in events(
        tmp_path / "r.db"
    )


# -- the report --------------------------------------------------------------------------------


def test_json_report_is_written(tmp_path: Path) -> None:
    rec, report = tmp_path / "r.gpuwhy.db", tmp_path / "report.json"
    result = gpuwhy(
        ["run", "--quiet", "--record", str(rec), "--json", str(report), "--", PY, "-c", "pass"],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(report.read_text())
    assert document["schema_version"] >= 1


def test_a_report_failure_keeps_the_exit_code_and_the_recording(tmp_path: Path) -> None:
    rec = tmp_path / "r.gpuwhy.db"
    # /dev/full: every write fails with ENOSPC, a real disk-full on the report.
    result = gpuwhy(
        ["run", "--record", str(rec), "--json", "/dev/full", "--", PY, "-c", "raise SystemExit(9)"],
        tmp_path,
    )
    assert result.returncode == 9
    assert b"gpuwhy: warning: no JSON report written to /dev/full" in result.stderr
    with Recording.open(rec) as recording:
        assert recording.complete and recording.meta["exit_code"] == 9


_SHOW_ENV = (
    "import os\n"
    "print(os.environ.get('PYTHONPATH', '').split(os.pathsep)[0])\n"
    "print(os.environ.get('GPUWHY_BOOT'))\n"
    "print(bool(os.environ.get('GPUWHY_SOCKET')), bool(os.environ.get('GPUWHY_RUN_ID')))\n"
)


def test_hooks_are_injected_unless_no_hooks(tmp_path: Path) -> None:
    with_hooks = gpuwhy(["run", "--quiet", "--", PY, "-c", _SHOW_ENV], tmp_path)
    first, boot, flags = with_hooks.stdout.decode().splitlines()
    assert first.endswith(os.path.join("gpuwhy", "hooks", "boot")), with_hooks.stderr
    assert (boot, flags) == ("None", "True True")
    without = gpuwhy(["run", "--quiet", "--no-hooks", "--", PY, "-c", _SHOW_ENV], tmp_path)
    first, boot, flags = without.stdout.decode().splitlines()
    assert not first.endswith("boot") and (boot, flags) == ("0", "True True")


def test_ctrl_c_is_forwarded_to_a_child_that_left_the_terminals_group(tmp_path: Path) -> None:
    # Launchers may put the job in a process group of its own: the terminal's Ctrl-C then
    # reaches only gpuwhy, which must pass it on.
    ready, marker = tmp_path / "ready", tmp_path / "marker"
    code = (
        "import os, signal, sys, time\n"
        "os.setpgid(0, 0)\n"
        "signal.signal(signal.SIGINT, lambda *a: sys.exit(open(sys.argv[2], 'w').write('INT')))\n"
        "open(sys.argv[1], 'w').close()\n"
        "time.sleep(60)\n"
    )
    exit_code, output = run_on_pty(
        [
            "run",
            "--quiet",
            "--record",
            str(tmp_path / "r.db"),
            "--",
            PY,
            "-c",
            code,
            str(ready),
            str(marker),
        ],
        tmp_path,
        send=b"\x03",
        after=ready,
    )
    assert exit_code == 3, output
    assert marker.read_text() == "INT"
    assert ("signal", "SIGINT: forwarded") in events(tmp_path / "r.db")


_TORCH_TRAINING = """
import time
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(256, 16), torch.randn(256, 1))
model = torch.nn.Linear(16, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(2):
    for features, target in DataLoader(data, batch_size=8):
        time.sleep(0.03)  # a step long enough for the live line to see a rate
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(features), target).backward()
        optimizer.step()
"""


@pytest.mark.slow
def test_real_torch_training_on_a_terminal_reports_steps(tmp_path: Path) -> None:
    python = str(framework_env("torch-cpu"))  # a job environment without gpuwhy installed
    script = tmp_path / "train.py"
    script.write_text(_TORCH_TRAINING)
    rec = tmp_path / "r.gpuwhy.db"
    code, output = run_on_pty(["run", "--record", str(rec), "--", python, str(script)], tmp_path)
    assert code == 0, output
    assert b" step/s" in output  # the live line picked up the hooks' steps
    with Recording.open(rec) as recording:
        steps = list(recording.spans(kind=SpanKind.STEP, phase="train"))
        assert recording.meta["python"] == python
        assert recording.meta["hooks"]["malformed"] == 0
    assert sum(span.steps for span in steps) == 2 * 256 // 8


def test_ctrl_backslash_on_the_terminal_reaches_the_child_once(tmp_path: Path) -> None:
    ready, count = tmp_path / "ready", tmp_path / "count"
    code = (
        "import signal, sys, time\n"
        "hits = []\n"
        "signal.signal(signal.SIGQUIT, lambda *a: hits.append(1))\n"
        "open(sys.argv[1], 'w').close()\n"
        "deadline = time.monotonic() + 60\n"
        "while not hits and time.monotonic() < deadline: time.sleep(0.01)\n"
        "time.sleep(1.0)\n"
        "open(sys.argv[2], 'w').write(str(len(hits)))\n"
    )
    exit_code, output = run_on_pty(
        [
            "run",
            "--quiet",
            "--record",
            str(tmp_path / "r.db"),
            "--",
            PY,
            "-c",
            code,
            str(ready),
            str(count),
        ],
        tmp_path,
        send=b"\x1c",
        after=ready,
    )
    assert exit_code == 0, output
    assert count.read_text() == "1"


def test_a_job_whose_framework_fails_to_import_exits_with_its_error(tmp_path: Path) -> None:
    # The hooks load at `import torch`, then torch's own code raises: gpuwhy's first record
    # comes at the interpreter's last garbage collection, when no thread can start any more.
    broken = tmp_path / "site" / "torch"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise RuntimeError('a broken torch install')\n")
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "run", "--quiet", "--", PY, "-c", "import torch"],
        cwd=tmp_path,
        env=_env(PYTHONPATH=f"{SRC}{os.pathsep}{broken.parent}"),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert b"RuntimeError: a broken torch install" in done.stderr
