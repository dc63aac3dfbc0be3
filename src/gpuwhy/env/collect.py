"""`collect_facts`: run every probe, concurrently, within one deadline.

Timeline: the machine and NVML probes (this process, threads) run alongside the interpreter probe
(a subprocess, ~0.3 s), which says which frameworks are installed; each installed framework is
then probed in its own subprocess, all at once. Wall time ≈ 0.3 s + the slowest framework import
(TensorFlow, ~6 s on 2 cores), never more than `timeout_s` plus the kill.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from gpuwhy._version import __version__
from gpuwhy.env import nvml_status
from gpuwhy.env.factfile import FACTS_KIND, FACTS_SCHEMA_VERSION
from gpuwhy.env.machine import probe_machine, relevant_environment
from gpuwhy.env.nvml_probe import probe_nvml
from gpuwhy.env.probe_cache import ProbeCache, probe_key
from gpuwhy.env.rules.view import KNOWN_PROVIDERS
from gpuwhy.env.runner import InterpreterError, run_probe
from gpuwhy.errors import UsageError

NVML_WAIT_S = 5.0

FRAMEWORK_PROBES = {
    "tensorflow": "tensorflow_probe.py",
    "torch": "torch_probe.py",
    "jax": "jax_probe.py",
}
# Distribution names that install each framework's importable module (the probe decides the rest).
_FRAMEWORK_DISTRIBUTIONS = {
    "tensorflow": KNOWN_PROVIDERS["tensorflow"],
    "torch": KNOWN_PROVIDERS["torch"],
    "jax": ("jax",),
}


class _Background(threading.Thread):
    """A daemon thread holding one probe's result: a hung NVML call cannot keep gpuwhy alive."""

    def __init__(self, target: Callable[[], dict[str, Any]]) -> None:
        super().__init__(daemon=True)
        self._target_fn = target
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self._target_fn()
        except BaseException as error:  # a probe bug must not lose the other facts
            self.error = error

    def outcome(self, deadline: float, clock: Callable[[], float], key: str) -> dict[str, Any]:
        """The probe's facts, or `{key: "timed_out"|"error", "error": ...}` if it gave none."""
        self.join(max(deadline - clock(), 0.0))
        if self.is_alive():
            return {key: nvml_status.TIMED_OUT, "error": "probe timed out"}
        if self.error is not None:
            error = f"{type(self.error).__name__}: {self.error}"
            return {key: nvml_status.ERROR, "error": error}
        return self.result or {}


def installed_frameworks(distributions: Mapping[str, Any]) -> list[str]:
    """Frameworks whose module some installed distribution provides."""
    found = []
    for framework, names in _FRAMEWORK_DISTRIBUTIONS.items():
        provided = any(framework in (d or {}).get("provides", []) for d in distributions.values())
        if provided or any(name in distributions for name in names):
            found.append(framework)
    return found


def _resolve_interpreter(python: str) -> str:
    """The interpreter's path: a bare name ('python3') is looked up on PATH."""
    if os.sep not in python and not (os.altsep and os.altsep in python):
        found = shutil.which(python)
        if found:
            return found
    if not os.path.exists(python):
        raise UsageError(
            f"--python {python}: no such file", "give the path of a Python interpreter"
        )
    if os.path.isdir(python):
        raise UsageError(
            f"--python {python} is a directory",
            f"give the interpreter itself, e.g. {os.path.join(python, 'bin', 'python')}",
        )
    return python


def _probe_interpreter(python: str, timeout_s: float, environ: Mapping[str, str]) -> dict[str, Any]:
    try:
        facts = run_probe(python, "python_probe.py", timeout_s=timeout_s, environ=environ)
    except InterpreterError as error:
        raise UsageError(
            f"--python {python} cannot be run: {error}", "give a Python >= 3.8"
        ) from error
    if facts.get("probe") == "failed" or (facts.get("probe") == "ok" and "version" not in facts):
        detail = facts.get("error") or ""
        raise UsageError(
            f"--python {python} is not a Python interpreter (>= 3.8)"
            + (f": {detail}" if detail else ""),
            "give the path of the python of the environment to check",
        )
    return facts


def collect_facts(
    python: str | None = None,
    *,
    environ: Mapping[str, str] = os.environ,
    timeout_s: float = 20.0,
    clock: Callable[[], float] = time.monotonic,
    cache: ProbeCache | None = None,
    reuse_cached: bool = True,
) -> dict[str, Any]:
    """Facts about this machine and the frameworks of `python` (default: this interpreter).

    Every framework probe runs in a subprocess of `python`, all concurrently, and all share one
    deadline of `timeout_s` seconds; a probe still running then is killed and recorded as timed
    out. Raises UsageError only when `python` is not a runnable Python; a broken install is a fact.
    With a `cache`, complete framework results are stored, and reused (unless `reuse_cached` is
    False) while the interpreter, its distributions, NVML's answer and the relevant environment
    are unchanged; `collected.frameworks_cached` says which happened.
    """
    target = _resolve_interpreter(python or sys.executable)
    start, wall = clock(), time.time()
    deadline = start + timeout_s
    nvml = _Background(probe_nvml)
    nvml.start()
    interpreter = _probe_interpreter(target, timeout_s, environ)
    distributions = interpreter.pop("distributions", {}) or {}
    libraries = interpreter.pop("libraries", {}) or {}
    # NVML answers in milliseconds; a hung driver call must not eat the frameworks' deadline.
    nvml_facts = nvml.outcome(min(deadline, clock() + NVML_WAIT_S), clock, "status")
    key = probe_key(interpreter, distributions, nvml_facts, relevant_environment(environ))
    cached = cache.get(key) if cache is not None and reuse_cached else None
    frameworks: dict[str, dict[str, Any]] = dict(cached) if cached is not None else {}
    threads = {}
    for name in [] if cached is not None else installed_frameworks(distributions):
        remaining = max(deadline - clock(), 0.1)

        def probe(script: str = FRAMEWORK_PROBES[name], limit: float = remaining) -> dict[str, Any]:
            return run_probe(target, script, timeout_s=limit, environ=environ)

        threads[name] = _Background(probe)
        threads[name].start()
    for name, thread in threads.items():
        # The subprocess time-out fires first; the extra second covers the kill and the reaping.
        frameworks[name] = thread.outcome(deadline + 1.0, clock, "probe")
    if cache is not None and cached is None:
        cache.put(key, frameworks)
    return {
        "kind": FACTS_KIND,
        "schema_version": FACTS_SCHEMA_VERSION,
        "gpuwhy_version": __version__,
        "collected": {
            "started_epoch_s": round(wall, 3),
            "duration_s": round(clock() - start, 2),
            "timeout_s": timeout_s,
            "frameworks_cached": cached is not None,
        },
        "system": probe_machine(environ),
        "environment": relevant_environment(environ),
        "nvml": nvml_facts,
        "python": interpreter,
        "distributions": distributions,
        "libraries": libraries,
        "frameworks": frameworks,
    }
