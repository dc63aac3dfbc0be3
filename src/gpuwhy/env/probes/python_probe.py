"""Target-interpreter probe: the interpreter, its distributions, the CUDA libraries it can load.

Runs with the target interpreter (Python >= 3.8, gpuwhy not importable there) and prints one JSON
document. Importing no framework keeps it fast (about 0.1 s).
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import platform
import re
import site
import sys
from typing import Any

# Distributions that decide whether a framework can use the GPU (PEP 503 normalised names).
_RELEVANT = re.compile(
    r"^(tensorflow(-.*)?|tf-nightly(-.*)?|tf-keras|keras(-nightly)?|intel-tensorflow"
    r"|torch|pytorch-.*|jax|jaxlib|jax-cuda\d+-(plugin|pjrt)|jax-metal|jax-rocm.*"
    r"|nvidia-.*|cuda-.*|pynvml|nvidia-ml-py)$"
)
# The top-level module a framework distribution installs: two distributions shipping the same one
# overwrite each other's files.
_MODULE_MARKERS = ("tensorflow/__init__.py", "torch/__init__.py", "jaxlib/__init__.py")

_LINUX_LIBRARIES = {
    "libcuda": ["libcuda.so.1"],
    "libnvidia-ml": ["libnvidia-ml.so.1"],
    "libcudart": ["libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"],
    "libcublas": ["libcublas.so.13", "libcublas.so.12", "libcublas.so.11"],
    "libcudnn": ["libcudnn.so.9", "libcudnn.so.8"],
}
_WINDOWS_LIBRARIES = {
    "libcuda": ["nvcuda.dll"],
    "libnvidia-ml": ["nvml.dll"],
    "libcudart": ["cudart64_13.dll", "cudart64_12.dll", "cudart64_110.dll"],
    "libcublas": ["cublas64_13.dll", "cublas64_12.dll", "cublas64_11.dll"],
    "libcudnn": ["cudnn64_9.dll", "cudnn64_8.dll"],
}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _distributions() -> dict[str, Any]:
    from importlib import metadata

    found: dict[str, Any] = {}
    for dist in metadata.distributions():
        raw = dist.metadata["Name"] or ""
        name = _normalise(raw)
        if not name or not _RELEVANT.match(name):
            continue
        if name in found:  # a second copy further down sys.path is shadowed: note it
            found[name].setdefault("shadowed_versions", []).append(dist.version)
            continue
        entry: dict[str, Any] = {"version": dist.version}
        if name.startswith(("tensorflow", "tf-nightly", "intel-tensorflow", "torch", "jaxlib")):
            record = "\n" + (dist.read_text("RECORD") or "")
            provides = [m.split("/")[0] for m in _MODULE_MARKERS if "\n" + m + "," in record]
            entry["provides"] = provides
        found[name] = entry
    return found


def _site_dirs() -> list[str]:
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if isinstance(user, str):
        dirs.append(user)
    dirs.extend(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    unique: list[str] = []
    for d in dirs:
        if d not in unique and os.path.isdir(d):
            unique.append(d)
    return unique


def _loaded_path(name: str) -> str | None:
    """Where the dynamic loader found `name` (Linux: /proc/self/maps)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rsplit(" ", 1)[-1].strip()
                if os.path.basename(path).startswith(name):
                    return path
    except OSError:
        pass
    return None


def _library(name: str, site_dirs: list[str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "loadable": False, "path": None, "error": None}
    try:
        ctypes.CDLL(name)  # the loader's own search: LD_LIBRARY_PATH, ldconfig cache, PATH
        entry["loadable"] = True
        entry["path"] = _loaded_path(name)
    except OSError as error:
        entry["error"] = str(error)[:300]
    wheel = None
    for d in site_dirs:  # pip's nvidia-* wheels, found by the frameworks through their RPATH
        for pattern in ("nvidia/*/lib/", "nvidia/*/*/lib/", "nvidia/*/bin/", "nvidia/*/*/bin/"):
            hits = glob.glob(os.path.join(d, pattern + name))
            if hits:
                wheel = hits[0]
                break
        if wheel:
            break
    entry["wheel_path"] = wheel
    return entry


def _libraries(site_dirs: list[str]) -> dict[str, Any]:
    if sys.platform.startswith("linux"):
        table = _LINUX_LIBRARIES
    elif sys.platform == "win32":
        table = _WINDOWS_LIBRARIES
    else:
        return {}
    return {family: [_library(n, site_dirs) for n in names] for family, names in table.items()}


def main() -> None:
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything a library prints goes to stderr; stdout carries only our JSON
    site_dirs = _site_dirs()
    facts: dict[str, Any] = {
        "executable": sys.executable,
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": sys.platform,
        "machine": platform.machine(),
        "prefix": sys.prefix,
        "in_virtualenv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
        "site_packages": site_dirs,
        "distributions": _distributions(),
        "libraries": _libraries(site_dirs),
    }
    out.write(json.dumps(facts))
    out.flush()


if __name__ == "__main__":
    main()
