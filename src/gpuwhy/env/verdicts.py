"""One verdict line per framework: will it use the GPU, and if not, the root causes in a phrase.

"TensorFlow 2.21.0: will run on CPU only — no NVIDIA driver in this docker container"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpuwhy.env import codes, nvml_status
from gpuwhy.env.rules.builds import installed
from gpuwhy.env.rules.view import View
from gpuwhy.model import Finding, Severity

_NVML_PHRASES = {
    nvml_status.DRIVER_NOT_LOADED: "NVIDIA kernel module not loaded",
    nvml_status.DRIVER_LIBRARY_MISMATCH: "driver/library version mismatch (reboot needed)",
    nvml_status.NO_PERMISSION: "no permission to use the NVIDIA driver",
    nvml_status.GPU_LOST: "the GPU fell off the bus",
    nvml_status.FUNCTION_NOT_FOUND: "NVIDIA driver too old for NVML",
}


def _no_driver(f: Finding) -> str:
    status = f.evidence.get("nvml_status")
    if status in _NVML_PHRASES:
        return _NVML_PHRASES[str(status)]
    if f.evidence.get("wsl"):
        return "no NVIDIA driver reachable from WSL"
    if f.evidence.get("container") and not f.evidence.get("device_nodes"):
        return f"no NVIDIA driver in this {f.evidence['container']} container"
    return "no NVIDIA driver" if status == nvml_status.LIBRARY_NOT_FOUND else "NVML error"


def _hidden(f: Finding) -> str:
    for name in ("CUDA_VISIBLE_DEVICES", "JAX_PLATFORMS", "JAX_PLATFORM_NAME"):
        if name in f.evidence:
            return f"{name}={f.evidence[name]!r} hides every GPU"
    return "the GPUs are hidden"


def _cpu_only(f: Finding) -> str:
    if f.evidence.get("platform") == "darwin":
        return "macOS has no CUDA"
    if f.evidence.get("platform") == "win32" and f.evidence.get("framework") == "tensorflow":
        return "no GPU support on native Windows"
    names = ", ".join(f"{n} {v}" for n, v in dict(f.evidence.get("distributions") or {}).items())
    return f"CPU-only build ({names})" if names else "CPU-only build"


_PHRASES: dict[str, Callable[[Finding], str]] = {
    codes.NO_DRIVER: _no_driver,
    codes.NO_GPU: lambda f: "the driver reports no GPU",
    codes.GPUS_HIDDEN: _hidden,
    codes.CPU_ONLY_BUILD: _cpu_only,
    codes.DRIVER_TOO_OLD: lambda f: (
        f"driver {f.evidence.get('driver_version')} too old for CUDA {f.evidence.get('build_cuda')}"
    ),
    codes.MISSING_CUDA_LIBS: lambda f: (
        "CUDA libraries missing"
        + (f" ({', '.join(f.evidence['missing'])})" if f.evidence.get("missing") else "")
    ),
    codes.UNSUPPORTED_ARCH: lambda f: (
        f"GPU compute capability {f.evidence.get('compute_capability')} not in this build"
    ),
    codes.CONFLICTING_PACKAGES: lambda f: (
        "conflicting packages (" + ", ".join(dict(f.evidence.get("distributions") or {})) + ")"
    ),
    codes.MIG_NO_INSTANCES: lambda f: "MIG mode without instances",
    codes.FRAMEWORK_NO_GPU: lambda f: "it finds no GPU (see its log)",
    codes.FRAMEWORK_IMPORT_FAILED: lambda f: str(f.evidence.get("import_error"))[:120],
}


def _phrase(finding: Finding) -> str:
    make = _PHRASES.get(finding.code)
    return make(finding) if make else finding.title


def _applies(finding: Finding, framework: str) -> bool:
    return finding.evidence.get("framework") in (None, framework)


def _gpus(framework: str, probe: Mapping[str, Any]) -> list[str]:
    if framework == "tensorflow":
        details = probe.get("gpu_details") or []
        names = [str(d.get("name") or "GPU") for d in details if isinstance(d, dict)]
        return names or [str(g) for g in probe.get("gpus") or []]
    if framework == "torch":
        devices = probe.get("devices") or []
        return [str(d.get("name") or "GPU") for d in devices if isinstance(d, dict)]
    return [
        str(d.get("kind") or "GPU")
        for d in probe.get("devices") or []
        if isinstance(d, dict) and d.get("platform") in ("gpu", "cuda")
    ]


def _verdict(view: View, framework: str, findings: Sequence[Finding]) -> str:
    label = view.framework_label(framework)
    mine = [f for f in findings if _applies(f, framework)]
    # The framework's own problems first, then the machine's.
    errors = sorted(
        (f for f in mine if f.severity is Severity.ERROR),
        key=lambda f: f.evidence.get("framework") is None,
    )
    probe = view.framework(framework) or {}
    import_error = (probe.get("probe") == "ok" and not probe.get("imported")) or probe.get(
        "probe"
    ) == "failed"
    gpus = _gpus(framework, probe) if probe.get("imported") else []
    if gpus:  # what the framework itself found is the ground truth
        count = f"{len(gpus)} GPU" + ("s" if len(gpus) > 1 else "")
        problems = [
            f.code
            for f in sorted(mine, key=lambda f: f.severity.rank)
            if f.severity is not Severity.INFO
        ]
        tail = f" — with problems: {', '.join(dict.fromkeys(problems))}" if problems else ""
        return f"{label}: will use {count} ({', '.join(dict.fromkeys(gpus))}){tail}"
    if errors:
        head = "cannot be imported" if import_error else "will run on CPU only"
        reasons = "; ".join(dict.fromkeys(_phrase(f) for f in errors))
        return f"{label}: {head} — {reasons}"
    if probe.get("probe") == "timed_out":
        return f"{label}: could not be checked — {probe.get('error') or 'probe timed out'}"
    if import_error:
        return f"{label}: cannot be imported — {probe.get('import_error')}"
    if view.driver_state == "ok" and not probe.get("imported"):
        return f"{label}: should be able to use the GPU (not verified: the probe did not run)"
    return f"{label}: will run on CPU only"


def verdicts(facts: Mapping[str, Any], findings: Sequence[Finding]) -> list[str]:
    """One line per installed framework; a single line when none is installed."""
    view = View(facts)
    frameworks = installed(view)
    if not frameworks:
        return [f"No TensorFlow, PyTorch or JAX installed in {view.python_executable}"]
    return [_verdict(view, name, findings) for name in frameworks]
