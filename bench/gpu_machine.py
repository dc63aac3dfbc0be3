"""What a GPU-truth manifest says of the machine: GPUs, driver, CUDA, framework versions.

Nothing that names the host or its users: no hostname, no home folder, no user name.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

_VERSIONS = """
import importlib.metadata as m, json, sys
names = ("torch", "jax", "jaxlib", "keras", "numpy", "nvidia-ml-py", "rich", "psutil",
         "tensorflow", "jax-cuda13-plugin", "jax-cuda12-plugin")
found = {}
for name in names:
    try:
        found[name] = m.version(name)
    except m.PackageNotFoundError:
        pass
try:
    import torch
    found["torch.version.cuda"] = torch.version.cuda
    found["torch.cuda.is_available"] = torch.cuda.is_available()
except Exception as error:
    found["torch_error"] = repr(error)
print(json.dumps({"python": sys.version.split()[0], "packages": found}))
"""


def _run(command: list[str], env: dict[str, str] | None = None) -> str | None:
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=60, env=env, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def gpus() -> list[dict[str, str]]:
    """Each GPU as nvidia-smi reports it; empty without a driver."""
    if shutil.which("nvidia-smi") is None:
        return []
    fields = ("name", "uuid", "driver_version", "memory.total", "pci.bus_id", "compute_cap")
    out = _run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"])
    rows = [line.split(", ") for line in (out or "").strip().splitlines()]
    return [dict(zip(fields, row, strict=False)) for row in rows if row]


def cuda_version() -> str | None:
    """The CUDA version the driver supports (nvidia-smi's header)."""
    out = _run(["nvidia-smi"]) if shutil.which("nvidia-smi") else None
    for line in (out or "").splitlines():
        if "CUDA Version:" in line:
            return line.split("CUDA Version:")[1].split()[0].strip("|")
    return None


def facts(python: str, env: dict[str, str]) -> dict[str, Any]:
    versions = _run([python, "-c", _VERSIONS], env)
    return {
        "gpus": gpus(),
        "cuda_driver_version": cuda_version(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(terse=True),
        "kernel": platform.release(),
        "software": json.loads(versions) if versions else None,
    }


def commit(root: Path) -> str:
    """The repository's commit: GPUWHY_KIT_COMMIT where it is given, else git's answer. The
    variable comes first: a copy of a working tree can carry a `.git` of an older commit (one
    capture's manifest named cf2c287 for code at eac4a9a)."""
    given = os.environ.get("GPUWHY_KIT_COMMIT")
    if given:
        return given
    out = _run(["git", "-C", str(root), "rev-parse", "HEAD"]) if shutil.which("git") else None
    return (out or "").strip() or "unknown"
