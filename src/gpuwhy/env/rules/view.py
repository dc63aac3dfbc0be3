"""A typed, forgiving reading of a facts document for the rules.

Facts may come from an older gpuwhy, another OS or a hand-made file: every accessor tolerates a
missing or malformed value and answers None/empty instead of raising.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuwhy.env import nvml_status
from gpuwhy.env.tables import cuda_from_driver_int, parse_version

DISPLAY_NAMES = {"tensorflow": "TensorFlow", "torch": "PyTorch", "jax": "JAX"}
# NVML statuses that mean "no usable driver" (NO_DRIVER); NO_GPU is its own finding.
NO_DRIVER_STATUSES = frozenset(
    {
        nvml_status.LIBRARY_NOT_FOUND,
        nvml_status.DRIVER_NOT_LOADED,
        nvml_status.NO_PERMISSION,
        nvml_status.DRIVER_LIBRARY_MISMATCH,
        nvml_status.GPU_LOST,
        nvml_status.FUNCTION_NOT_FOUND,
        nvml_status.ERROR,
    }
)


# Distributions known to install each module, for facts whose distributions lack "provides".
KNOWN_PROVIDERS = {
    "tensorflow": (
        "tensorflow",
        "tensorflow-cpu",
        "tensorflow-gpu",
        "tensorflow-intel",
        "tensorflow-macos",
        "tf-nightly",
        "tf-nightly-cpu",
        "tf-nightly-gpu",
    ),
    "torch": ("torch",),
    "jaxlib": ("jaxlib",),
}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML listed it."""

    index: int
    name: str
    uuid: str | None
    compute_capability: tuple[int, int] | None
    mig_mode: bool | None
    mig_devices: tuple[str, ...] = field(default=())

    @property
    def label(self) -> str:
        return f"GPU {self.index} ({self.name})"


class View:
    """Accessors over one facts document."""

    def __init__(self, facts: Mapping[str, Any]) -> None:
        self.facts = facts
        self.system = _dict(facts.get("system"))
        self.nvml = _dict(facts.get("nvml"))
        self.python = _dict(facts.get("python"))
        self.environment = _dict(facts.get("environment"))
        self.distributions = _dict(facts.get("distributions"))
        self.libraries = _dict(facts.get("libraries"))
        self.frameworks = _dict(facts.get("frameworks"))

    # -- platform --------------------------------------------------------------------------
    @property
    def platform(self) -> str:
        """'linux', 'win32', 'darwin' (the target interpreter's sys.platform, else the OS)."""
        value = self.python.get("platform")
        if isinstance(value, str) and value:
            return "linux" if value.startswith("linux") else value
        system = str(self.system.get("os") or "").lower()
        return {"windows": "win32", "darwin": "darwin"}.get(system, system or "linux")

    @property
    def os_key(self) -> str:
        """Column of the driver table: 'windows' on Windows and in WSL2 (the Windows driver serves
        WSL2, CUDA on WSL User Guide), else 'linux'."""
        return "windows" if self.platform == "win32" or self.is_wsl else "linux"

    @property
    def is_macos(self) -> bool:
        return self.platform == "darwin"

    @property
    def is_windows(self) -> bool:
        return self.platform == "win32"

    @property
    def is_wsl(self) -> bool:
        return bool(self.system.get("wsl"))

    @property
    def container(self) -> str | None:
        value = self.system.get("container")
        return str(value) if value else None

    @property
    def device_nodes(self) -> list[str]:
        return [str(n) for n in _list(self.system.get("device_nodes"))]

    def env(self, name: str) -> str | None:
        value = self.environment.get(name)
        return str(value) if value is not None else None

    # -- driver ----------------------------------------------------------------------------
    @property
    def nvml_status(self) -> str | None:
        value = self.nvml.get("status")
        return str(value) if value else None

    @property
    def driver_state(self) -> str:
        """'ok' (a GPU answers), 'no_gpu', 'no_driver' or 'unknown' (NVML probe gave nothing)."""
        status = self.nvml_status
        if status == nvml_status.OK:
            return "ok" if self.gpu_count > 0 else "no_gpu"
        if status == nvml_status.NO_GPU:
            return "no_gpu"
        if status in NO_DRIVER_STATUSES:
            return "no_driver"
        return "unknown"

    @property
    def driver_version(self) -> str | None:
        value = self.nvml.get("driver_version")
        return str(value) if value else None

    @property
    def driver_cuda(self) -> tuple[int, int] | None:
        """The highest CUDA the driver supports, e.g. (12, 8)."""
        value = self.nvml.get("cuda_driver_version")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return cuda_from_driver_int(value)
        return None

    @property
    def gpus(self) -> list[Gpu]:
        found: list[Gpu] = []
        for raw in _list(self.nvml.get("devices")):
            item = _dict(raw)
            capability = _list(item.get("compute_capability"))
            found.append(
                Gpu(
                    index=int(item.get("index", len(found))),
                    name=str(item.get("name") or "NVIDIA GPU"),
                    uuid=str(item["uuid"]) if item.get("uuid") else None,
                    compute_capability=(int(capability[0]), int(capability[1]))
                    if len(capability) == 2
                    else None,
                    mig_mode=mig if isinstance(mig := item.get("mig_mode"), bool) else None,
                    mig_devices=tuple(str(u) for u in _list(item.get("mig_devices"))),
                )
            )
        return found

    @property
    def gpu_count(self) -> int:
        count = self.nvml.get("device_count")
        if isinstance(count, int) and not isinstance(count, bool):
            return count
        return len(_list(self.nvml.get("devices")))

    # -- the target interpreter --------------------------------------------------------------
    @property
    def python_executable(self) -> str:
        return str(self.python.get("executable") or "python")

    @property
    def python_version(self) -> tuple[int, ...]:
        return parse_version(str(self.python.get("version") or ""))

    def pip(self, arguments: str) -> str:
        """A pip command line for the target interpreter, quoted for its shell."""
        python = self.python_executable
        if self.is_windows:
            quoted = f'"{python}"' if " " in python else python
        else:
            quoted = shlex.quote(python)
        return f"{quoted} -m pip {arguments}"

    def dist(self, name: str) -> dict[str, Any] | None:
        value = self.distributions.get(name)
        return value if isinstance(value, dict) else None

    def dist_version(self, name: str) -> str | None:
        value = (self.dist(name) or {}).get("version")
        return str(value) if value else None

    def framework(self, name: str) -> dict[str, Any] | None:
        value = self.frameworks.get(name)
        return value if isinstance(value, dict) else None

    def imported(self, name: str) -> dict[str, Any] | None:
        """The framework's probe facts when its probe ran and the import worked."""
        probe = self.framework(name)
        if probe and probe.get("probe") == "ok" and probe.get("imported"):
            return probe
        return None

    def providers(self, module: str) -> list[str]:
        """Installed distributions that ship `module` (tensorflow: tensorflow-cpu, ...)."""
        found: list[str] = []
        for name, raw in self.distributions.items():
            provides = _dict(raw).get("provides")
            if isinstance(provides, list):
                if module in provides:
                    found.append(str(name))
            elif name in KNOWN_PROVIDERS.get(module, ()):  # facts without RECORD information
                found.append(str(name))
        return found

    def framework_version(self, name: str) -> str | None:
        probe = self.framework(name) or {}
        if probe.get("version"):
            return str(probe["version"])
        module = {"tensorflow": "tensorflow", "torch": "torch", "jax": "jaxlib"}[name]
        for dist in [name] if name == "jax" else self.providers(module):
            version = self.dist_version(dist)
            if version:
                return version
        return None

    def framework_label(self, name: str) -> str:
        version = self.framework_version(name)
        return f"{DISPLAY_NAMES[name]} {version}" if version else DISPLAY_NAMES[name]

    def library_found(self, soname: str) -> bool | None:
        """Whether `soname` is loadable or shipped by a pip wheel; None if it was not checked."""
        for entries in self.libraries.values():
            for raw in _list(entries):
                entry = _dict(raw)
                if entry.get("name") == soname:
                    return bool(entry.get("loadable") or entry.get("wheel_path"))
        return None
