"""Reuse framework probe results while nothing they depend on has changed.

Importing TensorFlow, PyTorch and JAX to probe them costs seconds of CPU (about 7 s on two
cores). `gpuwhy run` probes the job's interpreter on every run, concurrently with the job, so
without a cache every run would compete with the training it measures. A probe's answer depends
only on the interpreter, the distributions installed in it, the driver and GPUs NVML reports,
and the relevant environment variables: those form the key, and a result is reused only for an
identical key and for at most `MAX_AGE_S`. Only complete results (every probe "ok") are stored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuwhy._version import __version__

MAX_AGE_S = 24 * 3600.0
"""A day: an upgrade of something outside the key (a system CUDA library) is noticed by tomorrow."""

ENV_CACHE_DIR = "GPUWHY_CACHE_DIR"


def default_cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """$GPUWHY_CACHE_DIR, else $XDG_CACHE_HOME/gpuwhy, else ~/.cache/gpuwhy."""
    if environ.get(ENV_CACHE_DIR):
        return Path(environ[ENV_CACHE_DIR])
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "gpuwhy")


def probe_key(
    interpreter: Mapping[str, Any],
    distributions: Mapping[str, Any],
    nvml: Mapping[str, Any],
    environment: Mapping[str, str],
) -> str:
    """A digest of everything a framework probe's answer depends on."""
    basis = {
        "gpuwhy": __version__,
        "executable": interpreter.get("executable"),
        "version": interpreter.get("version"),
        "prefix": interpreter.get("prefix"),
        "distributions": {name: (d or {}).get("version") for name, d in distributions.items()},
        "nvml": nvml,
        "environment": dict(environment),
    }
    text = json.dumps(basis, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class ProbeCache:
    """Framework probe results on disk, one small JSON file per key. Never raises."""

    def __init__(self, directory: Path, *, max_age_s: float = MAX_AGE_S) -> None:
        self.directory = directory
        self.max_age_s = max_age_s

    def get(self, key: str, *, now: float | None = None) -> dict[str, Any] | None:
        """The stored frameworks for `key`, or None when absent, stale or unreadable."""
        path = self.directory / f"frameworks-{key}.json"
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(document, dict) or not isinstance(document.get("frameworks"), dict):
            return None
        stored_at = document.get("stored_epoch_s")
        age = (time.time() if now is None else now) - float(stored_at or 0)
        if not 0 <= age <= self.max_age_s:
            return None
        frameworks: dict[str, Any] = document["frameworks"]
        return frameworks

    def put(self, key: str, frameworks: Mapping[str, Any], *, now: float | None = None) -> bool:
        """Store complete results atomically; partial ones (a time-out, a crash) are not kept."""
        if not frameworks or any(
            (result or {}).get("probe") != "ok" for result in frameworks.values()
        ):
            return False
        document = {
            "stored_epoch_s": time.time() if now is None else now,
            "frameworks": dict(frameworks),
        }
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(fd, "w") as handle:
                json.dump(document, handle, default=str)
            os.replace(temporary, self.directory / f"frameworks-{key}.json")
        except OSError:
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(temporary)
            return False
        return True
