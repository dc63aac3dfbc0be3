"""The machine a benchmark ran on, as every result file names it.

Benchmarks are run as scripts (`python bench/NAME.py`), so this folder is first on `sys.path`
and they import this module as `machine`.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

PY312 = Path(__file__).resolve().parents[1] / ".venvs" / "py312-jax" / "bin" / "python"
"""The Python 3.12 (with JAX) that scripts/test-envs.sh makes: a plain generator's reads are
timed from 3.12 on, so the benches that measure them run there."""


def _proc_field(path: str, key: str) -> str | None:
    """The value of the first `key: value` line of a /proc file, or None."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu() -> str:
    """The CPU's model name."""
    return _proc_field("/proc/cpuinfo", "model name") or platform.processor() or platform.machine()


def ram() -> str:
    """Total memory, in GiB."""
    total = _proc_field("/proc/meminfo", "MemTotal")
    try:
        return f"{int(total.split()[0]) / 2**20:.0f} GiB" if total else "unknown"
    except (ValueError, IndexError):
        return "unknown"


def gpus() -> str:
    """The NVIDIA GPUs nvidia-smi lists, or why there are none."""
    if shutil.which("nvidia-smi") is None:
        return "none (no NVIDIA driver)"
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (nvidia-smi failed)"
    names = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return ", ".join(names) if names else "none (nvidia-smi lists no GPU)"


def load() -> str:
    """The load averages over 1, 5 and 15 minutes."""
    try:
        return " / ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


def version(package: str) -> str | None:
    """An installed distribution's version, or None."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def describe() -> str:
    """One line: CPU, cores, memory, OS and Python — the header of a result file."""
    return (
        f"{cpu()}, {os.cpu_count()} logical cores, {ram()}, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}"
    )


def lines() -> list[str]:
    """The machine in full, as docs/performance.md shows it."""
    frameworks = ", ".join(
        f"{name} {v}" for name in ("tensorflow", "keras", "torch", "jax") if (v := version(name))
    )
    return [
        f"- CPU: {cpu()}, {os.cpu_count()} logical cores; RAM {ram()}",
        f"- OS: {platform.system()} {platform.release()} ({platform.platform()})",
        f"- Python {platform.python_version()} ({sys.executable}); gpuwhy "
        f"{version('gpuwhy') or 'from source'}",
        f"- Frameworks: {frameworks or 'none'}",
        f"- GPU: {gpus()}",
        f"- Load average when the run started (1/5/15 min): {load()} — other work on the "
        "machine slows every timing below alike",
    ]
