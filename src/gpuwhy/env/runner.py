"""Run one probe script with the target interpreter, with a time-out; its result is a fact.

A probe that hangs (TensorFlow's cuInit on a broken driver) is killed with its whole process group
at the time-out and becomes ``{"probe": "timed_out", ...}``; a probe that crashes becomes
``{"probe": "failed", ...}``. Nothing here raises for a broken framework.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

PROBES_DIR = Path(__file__).resolve().parent / "probes"

# Lines of a framework's stderr worth keeping as evidence: CUDA, driver and library trouble.
_RELEVANT = re.compile(
    r"cuInit|cuda|cudnn|cublas|dlopen|dynamic librar|shared object|driver|gpu|nvidia|nvml"
    r"|ptx|compute capability|kernel image",
    re.IGNORECASE,
)
_NOISE = re.compile(r"oneDNN custom operations|cpu_feature_guard|rebuild TensorFlow|libtpu|'tpu'")
# absl/glog prefixes: "I0000 00:00:1795.12    8349 " and "2024-09-24 09:32:51.31: W ".
_PREFIX = re.compile(r"^(?:[IWEF]\d{4} [\d:.]+\s+\d+\s+|\d{4}-\d\d-\d\d [\d:.]+: [IWEF] )")
MAX_LOG_LINES = 30
MAX_LINE_CHARS = 300


def relevant_log_lines(stderr: str) -> list[str]:
    """The distinct CUDA/driver lines of a probe's stderr, without log prefixes."""
    kept: list[str] = []
    for raw in stderr.splitlines():
        line = _PREFIX.sub("", raw.strip())
        if line and _RELEVANT.search(line) and not _NOISE.search(line) and line not in kept:
            kept.append(line[:MAX_LINE_CHARS])
    return kept[:MAX_LOG_LINES]


# Probes still running; killed if gpuwhy exits first (Ctrl-C): their own session keeps the
# terminal's signal from them, so nothing else would stop a hung one.
_RUNNING: set[subprocess.Popen[bytes]] = set()
_RUNNING_LOCK = threading.Lock()


@atexit.register
def _kill_running() -> None:
    with _RUNNING_LOCK:
        for process in list(_RUNNING):
            _kill(process)


class InterpreterError(Exception):
    """The interpreter could not be started at all (missing, not executable)."""


def _kill(process: subprocess.Popen[bytes]) -> None:
    try:
        if sys.platform == "win32":
            process.kill()
        else:  # the probe's own children (a framework's helpers) go too
            os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass


def run_probe(
    python: str,
    script: str | Path,
    *,
    timeout_s: float,
    environ: Mapping[str, str],
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Run ``python probes/<script>`` (or the script at an absolute path) and return its JSON
    document plus the probe's status facts.

    Raises InterpreterError only when `python` cannot be executed at all.
    """
    env = dict(environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "0"  # a user's "3" would hide the cuInit/dlopen errors we read
    start = clock()
    try:
        process = subprocess.Popen(
            [python, str(PROBES_DIR / script)],  # an absolute `script` replaces PROBES_DIR
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=sys.platform != "win32",
        )
    except OSError as error:
        raise InterpreterError(str(error)) from error
    with _RUNNING_LOCK:
        _RUNNING.add(process)
    try:
        stdout, stderr = process.communicate(timeout=max(timeout_s, 0.1))
    except subprocess.TimeoutExpired:
        _kill(process)
        try:
            _, stderr = process.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a grandchild left the group and holds the pipes
            process.kill()
            stderr = b""
        return {
            "probe": "timed_out",
            "elapsed_s": round(clock() - start, 2),
            "error": f"probe timed out after {timeout_s:.1f} s",
            "log": relevant_log_lines(stderr.decode("utf-8", "replace")),
        }
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(process)
    text = stderr.decode("utf-8", "replace")
    result: dict[str, Any] = {"probe": "ok", "elapsed_s": round(clock() - start, 2)}
    try:
        data = json.loads(stdout.decode("utf-8", "replace"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except ValueError:
        tail = text.strip().splitlines()[-1:] or [f"exit status {process.returncode}"]
        message = tail[0][:MAX_LINE_CHARS]
        result.update(probe="failed", error=message, exit_status=process.returncode)
        data = {}
    result.update(data)
    own = [str(line) for line in data.get("log", [])]
    result["log"] = relevant_log_lines("\n".join([*own, text]))
    return result
