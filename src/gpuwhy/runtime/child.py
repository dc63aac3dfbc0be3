"""Start the user's command as a child and supervise it until it exits.

The child inherits gpuwhy's stdin, stdout, stderr and process group: its output is never captured,
and a terminal's Ctrl-C reaches it directly. Signals sent to gpuwhy itself are passed on:

- SIGTERM, SIGHUP, SIGQUIT: forwarded to the child; gpuwhy keeps recording until it exits
  (SIGQUIT typed as Ctrl-\\ on the terminal is treated like Ctrl-C below: already delivered).
- SIGINT: when gpuwhy runs in the terminal's foreground process group and the child is still in
  that group, the terminal has already delivered it to the child, so gpuwhy only keeps waiting;
  otherwise (no terminal, a background job, a child that left the group) it is forwarded. A
  ``kill -INT <gpuwhy>`` from elsewhere while gpuwhy runs in the foreground cannot be told apart
  from a Ctrl-C and is therefore not forwarded. Each further SIGINT while the child still runs
  sends it SIGTERM, for a job that ignores or hangs on Ctrl-C. gpuwhy never sends SIGKILL: that
  stays the user's decision.

The exit status follows the shell: the child's code, 128+N when signal N killed it, 127 when the
command is not found and 126 when it cannot be executed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from gpuwhy.errors import ExitCode, GpuwhyError
from gpuwhy.wire import ENV_BOOT, ENV_PROFILE, ENV_RUN_ID, ENV_SOCKET, ENV_TRY

FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
"""Signals that gpuwhy passes on to the child as they are."""
SIGNAL_LATENCY_S = 0.25
"""At most this late, a signal that another thread of gpuwhy took is passed on (`Child.wait`)."""

OnSignal = Callable[[int, str], None]
"""Called (in the main thread) with the signal number and what gpuwhy did about it."""


class SpawnError(GpuwhyError):
    """The command could not be started (127: not found, 126: not executable)."""

    def __init__(self, message: str, exit_code: ExitCode) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def boot_dir() -> Path | None:
    """The folder holding the hooks' `sitecustomize` boot module, or None if it is missing."""
    import gpuwhy.hooks

    path = Path(gpuwhy.hooks.__file__).parent / "boot"
    return path if (path / "sitecustomize.py").is_file() else None


def child_environment(
    socket_path: str | None,
    *,
    hooks: bool = True,
    run_id: str | None = None,
    environ: Mapping[str, str] = os.environ,
    profile: tuple[int, int, Path] | None = None,
    trial: str | None = None,
) -> dict[str, str]:
    """The job's environment: gpuwhy's, plus the socket, the run id and (with hooks) the boot dir.

    The boot folder goes first on PYTHONPATH so Python imports its `sitecustomize`, which hands
    over to any sitecustomize of the user's afterwards. With ``hooks=False`` the job still learns
    the socket (explicit `gpuwhy.phase()` calls keep working) but nothing is injected.
    """
    env = dict(environ)
    env[ENV_RUN_ID] = run_id or os.urandom(16).hex()
    if socket_path:
        env[ENV_SOCKET] = socket_path
    boot = boot_dir() if hooks else None
    if boot is not None:
        rest = env.get("PYTHONPATH", "")
        env["PYTHONPATH"] = str(boot) + (os.pathsep + rest if rest else "")
        env.pop(ENV_BOOT, None)
    else:
        env[ENV_BOOT] = "0"
    env.pop(ENV_PROFILE, None)  # a window is opened only when this run asks for one
    if profile is not None and boot is not None:
        skip, steps, directory = profile
        env[ENV_PROFILE] = f"{skip}:{steps}:{directory}"
    env.pop(ENV_TRY, None)  # likewise the fixes of a `gpuwhy try` run
    if trial is not None and boot is not None:
        env[ENV_TRY] = trial
    return env


def resolve_command(command: Sequence[str], environ: Mapping[str, str]) -> str:
    """The executable's path, or SpawnError (127/126) with the shell's one-line wording."""
    name = command[0]
    if os.sep in name:
        if not os.path.exists(name):
            raise SpawnError(f"{name}: no such file", ExitCode.COMMAND_NOT_FOUND)
        if os.path.isdir(name) or not os.access(name, os.X_OK):
            raise SpawnError(
                f"{name}: not executable (permission denied or a directory)",
                ExitCode.CANNOT_EXECUTE,
            )
        return name
    found = shutil.which(name, path=environ.get("PATH", os.defpath))
    if found is None:
        raise SpawnError(f"{name}: command not found", ExitCode.COMMAND_NOT_FOUND)
    return found


def exit_status(returncode: int) -> int:
    """The shell's exit status for a subprocess return code (-N means killed by signal N)."""
    return 128 - returncode if returncode < 0 else returncode


def in_terminal_foreground() -> bool:
    """Whether gpuwhy's process group is the foreground group of its controlling terminal.

    Then a Ctrl-C typed there is delivered by the kernel to gpuwhy and the child together.
    """
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False  # no controlling terminal
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


class Child:
    """The running command and the signal forwarding around it.

    Use as ``with Child(cmd, env) as child: code = child.wait()``; the signal handlers are
    installed before the process starts (a SIGTERM in between is not lost) and restored on exit.
    """

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str],
        *,
        on_signal: OnSignal | None = None,
        foreground: Callable[[], bool] = in_terminal_foreground,
        output: Path | None = None,
    ) -> None:
        self.command = list(command)
        self.output = output  # a file for the command's stdout and stderr (`gpuwhy try`)
        self.env = dict(env)
        self.process: subprocess.Popen[bytes] | None = None
        self._on_signal = on_signal
        self._foreground = foreground
        self._pending: list[int] = []
        self._interrupts = 0
        self._saved: dict[int, Any] = {}

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def __enter__(self) -> Child:
        if threading_is_main():
            for signum in (*FORWARDED, signal.SIGINT):
                self._saved[signum] = signal.signal(signum, self._handle)
        try:
            self.start()
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def start(self) -> None:
        """Start the command; SpawnError (127/126) when it cannot be run."""
        executable = resolve_command(self.command, self.env)
        try:
            if self.output is None:
                self.process = subprocess.Popen(
                    self.command, executable=executable, env=self.env, close_fds=True
                )
            else:
                with open(self.output, "ab") as log:
                    self.process = subprocess.Popen(
                        self.command,
                        executable=executable,
                        env=self.env,
                        close_fds=True,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
        except FileNotFoundError as error:
            raise SpawnError(
                f"{self.command[0]}: command not found", ExitCode.COMMAND_NOT_FOUND
            ) from error
        except OSError as error:  # EACCES, ENOEXEC (no #! line), EISDIR…
            reason = os.strerror(error.errno) if error.errno else str(error)
            if error.errno == errno.ENOEXEC:
                reason = "exec format error (a script without a #! line?)"
            raise SpawnError(f"{self.command[0]}: {reason}", ExitCode.CANNOT_EXECUTE) from error
        for signum in self._pending:
            self._forward(signum, "forwarded")
        self._pending.clear()

    def wait(self) -> int:
        """Wait for the child (signals are handled meanwhile); its shell exit status.

        A signal the kernel hands to another thread (the sampler's, the listener's: any that
        does not block it) does not interrupt a blocking wait, and its handler only runs in the
        main thread: the wait wakes every `SIGNAL_LATENCY_S` so that it is forwarded that late
        at most, not when the job ends by itself. A pidfd (Linux) wakes it at the child's exit.
        """
        process = self.process
        assert process is not None
        pidfd = _pidfd(process.pid) if process.returncode is None else None
        try:
            while process.poll() is None:
                if pidfd is not None:
                    select.select([pidfd], [], [], SIGNAL_LATENCY_S)
                else:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        process.wait(timeout=SIGNAL_LATENCY_S)
        finally:
            if pidfd is not None:
                os.close(pidfd)
        assert process.returncode is not None
        return exit_status(process.returncode)

    # -- signals ------------------------------------------------------------------------------

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT:
            self._interrupts += 1
            if self._interrupts > 1:
                self._forward(signal.SIGTERM, "second interrupt: sent SIGTERM")
            elif self._foreground() and self._child_in_our_group():
                self._tell(signum, "delivered by the terminal; waiting for the command")
            else:
                self._forward(signum, "forwarded")
            return
        if signum == signal.SIGQUIT and self._foreground() and self._child_in_our_group():
            # Ctrl-\ reaches the whole foreground group, like Ctrl-C: do not deliver it twice.
            self._tell(signum, "delivered by the terminal; waiting for the command")
            return
        self._forward(signum, "forwarded")

    def _child_in_our_group(self) -> bool:
        # A launcher that moved the job to a process group of its own no longer gets the
        # terminal's Ctrl-C: then it must be forwarded.
        if self.process is None:
            return False
        try:
            return os.getpgid(self.process.pid) == os.getpgrp()
        except OSError:
            return True  # already gone: nothing to deliver

    def _forward(self, signum: int, action: str) -> None:
        if self.process is None:
            self._pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signum)  # polls first: never signals a reaped pid
        self._tell(signum, action)

    def _tell(self, signum: int, action: str) -> None:
        if self._on_signal is not None:
            with contextlib.suppress(Exception):
                self._on_signal(signum, action)

    def _restore(self) -> None:
        for signum, handler in self._saved.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signum, handler)
        self._saved.clear()


class FinishGuard:
    """Outside the child's lifetime: SIGINT, SIGTERM and SIGHUP ask gpuwhy to finish fast.

    Around the whole run, so a signal just before the child starts or while the recording is
    finalised and summarised sets ``event`` instead of killing gpuwhy half-way (which could lose
    the exit code). `Child` installs its own handlers on top while the child runs.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.event = threading.Event()
        self._saved: dict[int, Any] = {}

    def __enter__(self) -> FinishGuard:
        if threading_is_main():
            for signum in self.SIGNALS:
                self._saved[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._saved.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signum, handler)
        self._saved.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.event.set()


def _pidfd(pid: int) -> int | None:
    """A file descriptor that becomes readable when `pid` exits (Linux 5.3+), else None."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        return int(pidfd_open(pid))
    except OSError:
        return None


def threading_is_main() -> bool:
    """Signal handlers can only be installed from the main thread of the main interpreter."""
    return threading.current_thread() is threading.main_thread()
