"""Record one command from start to exit: the heart of `gpuwhy run`, without the report.

Order matters and is chosen so the job is never delayed and the recording always ends complete:
the recording and the socket exist before the child starts (its environment names the socket);
sampling and the environment probe start right after it; when the child exits, sampling stops
first (the recording ends with the job), the probe gets a short bounded wait, and the recording
is finalised whatever happened in between.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpuwhy.errors import ExitCode
from gpuwhy.model import Event
from gpuwhy.redact import REDACTION_META, redact_command
from gpuwhy.runtime.child import Child, SpawnError, child_environment
from gpuwhy.runtime.environment import WAIT_AT_EXIT_S, EnvironmentProbe, job_interpreter
from gpuwhy.runtime.session import Session

OnStarted = Callable[[Session], Callable[[], None] | None]
"""Called once the job runs (e.g. to start the live line); may return a function to call at exit."""


PROBE_WAIT_NOTE = (
    "reading the job's Python environment, once: its answers are kept for the next runs "
    "(Ctrl-C goes on without them)"
)


@dataclass(frozen=True)
class JobOptions:
    command: Sequence[str]
    record: Path
    interval_s: float = 0.1
    hooks: bool = True
    probe_environment: bool = True
    redact: bool = True  # mask credentials in the recorded command (`--no-redact`: False)
    environment_wait_s: float = WAIT_AT_EXIT_S
    # `--profile`: (steps skipped, steps profiled, the directory the traces go to)
    profile: tuple[int, int, Path] | None = None
    trial: str | None = None  # `gpuwhy try`: the run's fixes and step budget (wire.ENV_TRY)
    output: Path | None = None  # the command's stdout and stderr go to this file, not gpuwhy's


@dataclass
class JobResult:
    """How the job ended and what the recording holds."""

    exit_code: int
    record: Path
    started: bool  # False when the command could not be started (127/126)
    errors: list[str] = field(default_factory=list)  # problems of gpuwhy's, one line each
    spawn_error: SpawnError | None = None
    # A bug of gpuwhy's once the command had started: kept, not raised, so the command was still
    # waited for and its exit code stands (the caller reports it as an internal error).
    crash: Exception | None = None


def run_job(
    options: JobOptions,
    *,
    environ: Mapping[str, str] = os.environ,
    on_started: OnStarted | None = None,
    clock: Callable[[], int] = time.monotonic_ns,
    message_fd: int = 2,
    hurry: threading.Event | None = None,
) -> JobResult:
    """Run ``options.command`` under recording; returns once it has exited and all is written.

    Raises `RecordingError` before anything starts if the recording cannot be created. Every
    later problem of gpuwhy's own is reported in ``JobResult.errors``, and an unexpected
    exception once the command has started in ``JobResult.crash``, never raised: the command is
    waited for whatever happens to gpuwhy, and its exit code is what counts. ``hurry`` (see
    `FinishGuard`) set by a signal before the child starts means it is not started; set
    afterwards, gpuwhy stops waiting for the probe.
    """
    session = Session(options.record, interval_s=options.interval_s, clock=clock, listen=True)
    session.open()  # may raise RecordingError: nothing has started yet
    signals: list[tuple[int, int, str]] = []  # (t_ns, signum, action), written after the wait

    def on_signal(signum: int, action: str) -> None:
        signals.append((clock(), signum, action))
        if signum == signal.SIGINT:
            note = "waiting for the command to end (Ctrl-C again sends it SIGTERM)"
            if "SIGTERM" in action:
                note = "sent SIGTERM to the command; waiting for it to end"
            _say(message_fd, note)

    exit_code, started, spawn_error = 0, False, None
    crash: Exception | None = None
    exited_ns = clock()
    probe: EnvironmentProbe | None = None
    stop_display: Callable[[], None] | None = None
    try:
        socket_path = session.listener.path if session.listener is not None else None
        env = child_environment(
            socket_path,
            hooks=options.hooks,
            environ=environ,
            profile=options.profile,
            trial=options.trial,
        )
        python = job_interpreter(options.command, env)
        command = list(options.command)
        session.set_meta("command", redact_command(command) if options.redact else command)
        session.set_meta(REDACTION_META, "on" if options.redact else "off")
        session.set_meta("python", python)
        try:
            if hurry is not None and hurry.is_set():
                raise SpawnError("interrupted before the command started", ExitCode.INTERRUPTED)
            with Child(options.command, env, on_signal=on_signal, output=options.output) as child:
                started = True
                try:
                    session.put(
                        Event(clock(), "child_started", "command started", {"pid": child.pid})
                    )
                    if options.probe_environment:
                        probe = EnvironmentProbe(python)
                        probe.start()
                    session.start(job_pid=child.pid)
                    if on_started is not None:
                        stop_display = _guarded(lambda: on_started(session), session.errors)
                except Exception as error:
                    crash = error  # the job runs on, perhaps unrecorded, and is waited for
                exit_code = child.wait()
                exited_ns = clock()
        except SpawnError as error:
            exit_code, spawn_error = int(error.exit_code), error
            session.put(Event(clock(), "child_failed", error.message))
        finally:
            if stop_display is not None:
                _guarded(stop_display, session.errors)
        session.stop_sampling()
        for t_ns, signum, action in signals:
            name = signal.Signals(signum).name
            session.put(Event(t_ns, "signal", f"{name}: {action}", {"signal": signum}))
        if started:
            session.put(Event(exited_ns, "child_exited", "command ended", {"exit_code": exit_code}))
        if probe is not None:
            result = probe.finish(
                options.environment_wait_s,
                cancel=hurry,
                on_slow=lambda: _say(message_fd, PROBE_WAIT_NOTE),
            )
            if result is not None:
                session.set_meta("environment", result)
            else:
                session.set_meta("environment_error", probe.error)
        session.set_meta("gpuwhy_cost", _own_cost(probe))
    except Exception as error:
        if not started:
            raise
        crash = crash or error  # the job has ended: its exit code must not be lost
    finally:
        if probe is not None:
            probe.cancel()  # only does something if an error skipped the wait above
        try:
            session.stop(exit_code=exit_code)
        except Exception as error:
            if not started:
                raise
            crash = crash or error
    return JobResult(exit_code, options.record, started, list(session.errors), spawn_error, crash)


def _own_cost(probe: EnvironmentProbe | None) -> dict[str, float | None]:
    """CPU seconds gpuwhy itself spent on the run, so far: this process (start-up, sampling,
    listening, writing; the analysis after the job is not in it) and the environment probe."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "recorder_cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "probe_cpu_s": None if probe is None or probe.cpu_s is None else round(probe.cpu_s, 3),
    }


def _guarded(function: Callable[[], object], errors: list[str]) -> Callable[[], None] | None:
    """Call ``function``; a failure becomes one line in ``errors`` instead of ending the run."""
    try:
        result = function()
    except Exception as error:
        errors.append(f"{error!r}")
        return None
    return result if callable(result) else None


def _say(fd: int, text: str) -> None:
    # os.write: safe inside a signal handler, where a buffered stream may be mid-write.
    with contextlib.suppress(OSError):
        os.write(fd, f"\ngpuwhy: {text}\n".encode())
