"""The doctor's facts and findings for the job's own interpreter, gathered while the job runs.

The probe runs in a separate process of gpuwhy's interpreter, in its own session and at lower
CPU priority (nice 10): it never delays the job's start, competes little with it, is out of reach
of the terminal's Ctrl-C, and can be killed with everything it started if it is not done when
the job ends. Its frameworks are probed by `gpuwhy.env.collect_facts` in further subprocesses, so
nothing is imported into gpuwhy itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

PROBE_TIMEOUT_S = 20.0
"""Passed to `collect_facts`: the longest a single framework probe may take."""

WAIT_AT_EXIT_S = PROBE_TIMEOUT_S + 5.0
"""How long the end of a run waits for an unfinished probe before it is killed: the probe's own
limit, and its kills and reaping after it. Waiting less lost more than it saved: a probe killed
at the end of a short job stores nothing in the cache, so every later run of the quick check
(`python -c "import torch; print(torch.cuda.is_available())"`, the job that fails at its import)
waited the same, probed from cold again and ended without the facts that explain it. Probing
.venv's three frameworks took 6.9 s cold, 0.34 s from the cache (2-core machine, 2026-12-02)."""

NOTICE_AFTER_S = 2.0
"""A wait at the job's end longer than this is said, with how to skip it."""

PROBE_NICE = 10

_PROBE = """
import json, os, resource, sys
try:
    os.nice(int(sys.argv[3]))
except OSError:
    pass
from gpuwhy.env import collect_facts, evaluate
from gpuwhy.env.probe_cache import ProbeCache, default_cache_dir
facts = collect_facts(
    sys.argv[1] or None, timeout_s=float(sys.argv[2]), cache=ProbeCache(default_cache_dir())
)
findings = [finding.to_dict() for finding in evaluate(facts)]
cpu_s = sum(getattr(resource.getrusage(who), field) for who in
            (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN) for field in ("ru_utime", "ru_stime"))
json.dump({"facts": facts, "findings": findings, "cpu_s": cpu_s}, sys.stdout, default=str)
"""

_PYTHON_NAME = re.compile(r"python(\d+(\.\d+)?)?[tdm]?")


def is_python(path: str) -> bool:
    """Whether an executable's file name is a Python interpreter (python, python3, python3.11)."""
    return _PYTHON_NAME.fullmatch(os.path.basename(path)) is not None


def job_interpreter(command: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """The Python the job runs under, as an absolute path where it can be found.

    ``python …``, ``python3 …`` or a path to an interpreter is taken as is; a script with a
    ``#!`` line naming Python (``torchrun``, ``accelerate``, a ``train.py`` made executable) gives
    that interpreter; otherwise the first ``python``/``python3`` on the job's PATH.
    """
    path = environ.get("PATH", os.defpath)
    if command:
        first = command[0]
        executable = first if os.sep in first else shutil.which(first, path=path)
        if is_python(first):
            return os.path.abspath(executable) if executable else None
        if executable is not None:
            interpreter = _shebang_python(executable, path)
            if interpreter is not None:
                return interpreter
    for name in ("python", "python3"):
        found = shutil.which(name, path=path)
        if found is not None:
            return os.path.abspath(found)
    return None


def _shebang_python(executable: str, path: str) -> str | None:
    try:
        with open(executable, "rb") as file:
            first_line = file.readline(512)
    except OSError:
        return None
    if not first_line.startswith(b"#!"):
        return None
    words = first_line[2:].decode(errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        names = [word for word in words[1:] if not word.startswith("-") and "=" not in word]
        if names and is_python(names[0]):
            found = shutil.which(names[0], path=path)
            return os.path.abspath(found) if found else None
        return None
    return words[0] if is_python(words[0]) else None


class EnvironmentProbe:
    """Collect facts and findings for ``python`` in the background.

    ``start()`` returns at once; ``finish(wait_s)`` returns ``{"facts", "findings"}`` or raises
    nothing and returns None with ``error`` set when the probe failed or was not done in time.
    """

    def __init__(self, python: str | None, *, timeout_s: float = PROBE_TIMEOUT_S) -> None:
        self.python = python
        self.timeout_s = timeout_s
        self.error: str | None = None
        self.cpu_s: float | None = None  # CPU seconds the probe and its subprocesses used
        self._result: dict[str, Any] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Launch the probe process and the thread that waits for it."""
        package_parent = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = package_parent + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
        )
        args = [sys.executable, "-c", _PROBE, self.python or "", str(self.timeout_s)]
        try:
            self._process = subprocess.Popen(
                [*args, str(PROBE_NICE)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,  # its own group: killable as a whole, immune to Ctrl-C
            )
        except OSError as error:
            self.error = f"environment probe could not start: {error}"
            return
        self._thread = threading.Thread(target=self._collect, name="gpuwhy-env", daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        assert self._process is not None
        out, err = self._process.communicate()
        if self._process.returncode != 0:
            lines = err.decode(errors="replace").strip().splitlines()
            self.error = "environment probe failed: " + (lines[-1] if lines else "no output")
            return
        try:
            result = json.loads(out)
        except ValueError:
            self.error = "environment probe wrote no JSON"
            return
        if isinstance(result, dict) and "facts" in result and "findings" in result:
            cpu_s = result.pop("cpu_s", None)
            self.cpu_s = float(cpu_s) if isinstance(cpu_s, (int, float)) else None
            self._result = result
        else:
            self.error = "environment probe wrote an unexpected document"

    def finish(
        self,
        wait_s: float = WAIT_AT_EXIT_S,
        *,
        cancel: threading.Event | None = None,
        on_slow: Callable[[], None] | None = None,
    ) -> dict[str, Any] | None:
        """The result, waiting at most ``wait_s`` (less if ``cancel`` is set meanwhile);
        ``on_slow`` is called once if the wait reaches `NOTICE_AFTER_S`.

        An unfinished probe is killed with every process it started.
        """
        if self._thread is not None:
            now = time.monotonic()
            deadline, notice = now + wait_s, now + NOTICE_AFTER_S
            while self._thread.is_alive() and time.monotonic() < deadline:
                if cancel is not None and cancel.is_set():
                    break
                if on_slow is not None and time.monotonic() >= notice:
                    on_slow()
                    on_slow = None
                self._thread.join(min(0.05, max(0.0, deadline - time.monotonic())))
            if self._thread.is_alive():
                self._kill()
                self._thread.join(1.0)
                self.error = (
                    "environment probe stopped at the job's end by a signal"
                    if cancel is not None and cancel.is_set()
                    else f"environment probe not done within {wait_s:g} s of the job's end"
                )
        return self._result

    def cancel(self) -> None:
        """Kill the probe and what it started, if it still runs. Idempotent."""
        self._kill()

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self._process.pid, signal.SIGKILL)
