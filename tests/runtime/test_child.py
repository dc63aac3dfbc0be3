"""Child supervision helpers: exit statuses, command resolution, the job's environment."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from gpuwhy.errors import ExitCode
from gpuwhy.runtime import child as child_module
from gpuwhy.runtime.child import (
    Child,
    SpawnError,
    child_environment,
    exit_status,
    resolve_command,
)
from gpuwhy.wire import ENV_BOOT, ENV_RUN_ID, ENV_SOCKET


def test_exit_status_follows_the_shell() -> None:
    assert exit_status(0) == 0
    assert exit_status(3) == 3
    assert exit_status(-signal.SIGKILL) == 137
    assert exit_status(-signal.SIGTERM) == 143


def test_resolve_command(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"]}
    assert resolve_command([sys.executable], env) == sys.executable
    assert resolve_command(["sh"], env).endswith("/sh")
    with pytest.raises(SpawnError) as missing:
        resolve_command(["no-such-command-gpuwhy"], env)
    assert missing.value.exit_code == ExitCode.COMMAND_NOT_FOUND
    assert missing.value.one_line() == "no-such-command-gpuwhy: command not found"
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    with pytest.raises(SpawnError) as not_executable:
        resolve_command([str(script)], env)
    assert not_executable.value.exit_code == ExitCode.CANNOT_EXECUTE
    with pytest.raises(SpawnError) as folder:
        resolve_command([str(tmp_path)], env)
    assert folder.value.exit_code == ExitCode.CANNOT_EXECUTE
    with pytest.raises(SpawnError) as no_file:
        resolve_command([str(tmp_path / "absent")], env)
    assert no_file.value.exit_code == ExitCode.COMMAND_NOT_FOUND


def test_child_environment_adds_socket_run_id_and_boot_dir() -> None:
    base = {"PATH": "/bin", "PYTHONPATH": "/user/lib", ENV_BOOT: "0"}
    env = child_environment("/tmp/x/hooks.sock", environ=base, run_id="abc")
    assert env[ENV_SOCKET] == "/tmp/x/hooks.sock" and env[ENV_RUN_ID] == "abc"
    assert env["PATH"] == "/bin"
    boot, rest = env["PYTHONPATH"].split(os.pathsep, 1)
    assert rest == "/user/lib"
    assert (Path(boot) / "sitecustomize.py").is_file()
    assert ENV_BOOT not in env
    assert base["PYTHONPATH"] == "/user/lib"  # the caller's mapping is left alone


def test_child_environment_without_hooks_injects_nothing() -> None:
    env = child_environment("/s", hooks=False, environ={"PYTHONPATH": "/user/lib"})
    assert env["PYTHONPATH"] == "/user/lib"
    assert env[ENV_BOOT] == "0" and env[ENV_SOCKET] == "/s"
    assert "PYTHONPATH" not in child_environment("/s", hooks=False, environ={})


def test_exec_format_error_is_126(tmp_path: Path) -> None:
    script = tmp_path / "noshebang"
    script.write_bytes(b"\x7fELF garbage")
    script.chmod(0o755)
    with pytest.raises(SpawnError) as error, Child([str(script)], {"PATH": "/bin"}):
        pass
    assert error.value.exit_code == ExitCode.CANNOT_EXECUTE
    assert "exec format error" in error.value.one_line()


def test_signals_are_forwarded_and_handlers_restored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(42))\n"
        "time.sleep(30)\n"
    )
    seen: list[tuple[int, str]] = []
    with Child(
        [sys.executable, "-c", code], dict(os.environ), on_signal=lambda s, a: seen.append((s, a))
    ) as child:
        # Wait for the child's handler, then signal gpuwhy (this process) itself.
        _wait_until_ready(child.pid)
        os.kill(os.getpid(), signal.SIGTERM)
        assert child.wait() == 42
    assert seen == [(signal.SIGTERM, "forwarded")]
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "no-pidfd"])
def test_a_signal_that_lands_on_another_thread_is_forwarded_while_waiting(
    pidfd: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kernel hands a signal sent to the process to any thread that does not block it, such
    # as gpuwhy's sampler or listener; the main thread, blocked waiting for the child, must still
    # run the handler that forwards it (it is only ever run there). Without pidfds (not Linux)
    # the wait is timed slices.
    if not pidfd:
        monkeypatch.setattr(child_module, "_pidfd", lambda pid: None)
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(42))\n"
        "time.sleep(30)\n"
    )

    def signal_this_thread() -> None:
        time.sleep(0.3)  # the main thread is in wait() by then
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    seen: list[tuple[int, str]] = []
    with Child(
        [sys.executable, "-c", code], dict(os.environ), on_signal=lambda s, a: seen.append((s, a))
    ) as child:
        _wait_until_ready(child.pid)
        threading.Thread(target=signal_this_thread, daemon=True).start()
        started = time.monotonic()
        assert child.wait() == 42
        assert time.monotonic() - started < 10
    assert seen == [(signal.SIGTERM, "forwarded")]


def _wait_until_ready(pid: int | None) -> None:
    assert pid is not None
    deadline = time.monotonic() + 20
    # The child installs its handler right after start; its /proc status shows it caught.
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/status") as status:
            caught = next(line for line in status if line.startswith("SigCgt:"))
        if int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.01)
    raise AssertionError("child never installed its SIGTERM handler")
