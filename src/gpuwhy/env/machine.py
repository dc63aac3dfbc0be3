"""Machine probe (in gpuwhy's own process): OS, WSL, container hints, NVIDIA device nodes, env vars.

Cheap file checks only (well under a millisecond); nothing here loads a library.
"""

from __future__ import annotations

import glob
import os
import platform
from collections.abc import Mapping
from typing import Any

# Variables that change whether or how a framework sees the GPU. Recorded only when set.
RELEVANT_VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_GPU_ALLOCATOR",
    "TF_CPP_MIN_LOG_LEVEL",
    "TF_USE_LEGACY_KERAS",
    "KERAS_BACKEND",
    "JAX_PLATFORMS",
    "JAX_PLATFORM_NAME",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_NVML_BASED_CUDA_CHECK",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_HOME",
    "CUDA_PATH",
    "LD_LIBRARY_PATH",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
)


def relevant_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The relevant variables that are set (an empty value counts: CUDA_VISIBLE_DEVICES="")."""
    return {name: environ[name] for name in RELEVANT_VARIABLES if name in environ}


def _read_first_line(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.readline().strip() or None
    except OSError:
        return None


def _container(root: str, environ: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """The container runtime this process seems to run in, and the hints that say so."""
    hints: list[str] = []
    kind: str | None = None
    if os.path.exists(os.path.join(root, ".dockerenv")):
        hints.append("/.dockerenv")
        kind = "docker"
    if os.path.exists(os.path.join(root, "run", ".containerenv")):
        hints.append("/run/.containerenv")
        kind = kind or "podman"
    if "KUBERNETES_SERVICE_HOST" in environ:
        hints.append("KUBERNETES_SERVICE_HOST")
        kind = kind or "kubernetes"
    cgroup = ""
    try:
        with open(os.path.join(root, "proc", "1", "cgroup"), encoding="utf-8") as handle:
            cgroup = handle.read(4096)
    except OSError:
        pass
    for word in ("docker", "kubepods", "containerd", "lxc"):
        if word in cgroup:
            hints.append(f"/proc/1/cgroup:{word}")
            kind = kind or ("kubernetes" if word == "kubepods" else word)
    return kind, hints


def probe_machine(environ: Mapping[str, str] = os.environ, *, root: str = "/") -> dict[str, Any]:
    """Facts about the machine gpuwhy runs on. `root` lets tests point it at a prepared tree."""
    osrelease = _read_first_line(os.path.join(root, "proc", "sys", "kernel", "osrelease")) or ""
    dxg = os.path.exists(os.path.join(root, "dev", "dxg"))
    nodes = sorted(glob.glob(os.path.join(root, "dev", "nvidia*")))
    device_nodes = ["/" + os.path.relpath(node, root).replace(os.sep, "/") for node in nodes]
    if dxg:
        device_nodes.append("/dev/dxg")
    kind, hints = _container(root, environ)
    return {
        "os": platform.system(),
        "release": platform.release(),
        "machine": platform.machine(),
        # WSL2 exposes the GPU through /dev/dxg; its kernel release names Microsoft.
        "wsl": dxg or "microsoft" in osrelease.lower(),
        "container": kind,
        "container_hints": hints,
        "device_nodes": device_nodes,
        # Present only while the NVIDIA kernel module is loaded (references.md#nvml-init).
        "proc_driver_version": _read_first_line(
            os.path.join(root, "proc", "driver", "nvidia", "version")
        ),
    }
