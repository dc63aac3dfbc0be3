"""UNSUPPORTED_ARCH: a GPU's compute capability against the architectures a build ships.

CUDA binary compatibility: native code (SASS, `sm_XY`) runs on GPUs of the same major with an
equal or higher minor (`sm_80` runs on 8.6); arch-specific `sm_XYa` only on exactly X.Y; PTX
(`compute_XY`) is JIT-compiled by the driver for any GPU of capability >= X.Y, slowly, at start-up
(NVIDIA, "CUDA Pro Tip: Understand Fat Binaries and JIT Caching"). TensorFlow: "Packages do not
contain PTX code except for the latest supported CUDA architecture" (tensorflow.org "Install
TensorFlow with pip", references.md#tf-install); the 2.21 wheel ships sm_60/70/80/89 + compute_90
(references.md#tf-build-info). PyTorch: the arch flags compiled in (`torch._C._cuda_getArchFlags()`;
torch warns "... is not compatible with the current PyTorch installation",
references.md#torch-builds). No GPU at all means nothing to judge.
"""

from __future__ import annotations

import re

from gpuwhy.env import codes
from gpuwhy.env.rules.view import Gpu, View
from gpuwhy.model import Finding, Severity

_ARCH = re.compile(r"^(sm|compute)_(\d+)(\d)([af]?)$")


def support(capability: tuple[int, int], arch_list: list[str]) -> str:
    """'native', 'ptx' (JIT from PTX only) or 'none' for a GPU of `capability`."""
    result = "none"
    for arch in arch_list:
        match = _ARCH.match(arch.strip().lower())
        if not match:
            continue
        kind, suffix = match.group(1), match.group(4)
        major, minor = int(match.group(2)), int(match.group(3))
        same_or_lower = minor == capability[1] if suffix == "a" else minor <= capability[1]
        if kind == "sm" and major == capability[0] and same_or_lower:
            return "native"
        if kind == "compute" and (major, minor) <= capability:
            result = "ptx"
    return result


def _arch_list(view: View, framework: str) -> list[str]:
    probe = view.imported(framework) or {}
    if framework == "tensorflow":
        info = probe.get("build_info") if isinstance(probe.get("build_info"), dict) else {}
        if not (info or {}).get("is_cuda_build"):
            return []
        return [str(a) for a in (info or {}).get("cuda_compute_capabilities", []) or []]
    if not probe.get("cuda"):
        return []
    return [str(a) for a in probe.get("arch_list", []) or []]


def _finding(view: View, framework: str, gpu: Gpu, archs: list[str], how: str) -> Finding:
    assert gpu.compute_capability is not None
    major, minor = gpu.compute_capability
    label = view.framework_label(framework)
    evidence = {
        "framework": framework,
        "gpu": gpu.index,
        "gpu_name": gpu.name,
        "compute_capability": f"{major}.{minor}",
        "build_architectures": archs,
    }
    if how == "ptx":
        return Finding(
            codes.UNSUPPORTED_ARCH,
            Severity.WARNING,
            f"{label} has no native code for {gpu.label}, compute capability {major}.{minor}: the"
            " driver JIT-compiles its PTX at start-up",
            evidence,
            f"Expect a slow first start while kernels compile; keep the driver's JIT cache between"
            f" runs (CUDA_CACHE_PATH, size CUDA_CACHE_MAXSIZE). A {label.split()[0]} build that"
            f" includes sm_{major}{minor} avoids it.",
        )
    oldest = min((a for a in archs if a.startswith("sm_")), default=None)
    return Finding(
        codes.UNSUPPORTED_ARCH,
        Severity.ERROR,
        f"{gpu.label}, compute capability {major}.{minor}, is not supported by {label}"
        f" (built for {', '.join(archs)})",
        evidence,
        f"Use a GPU this build supports (oldest: {oldest}) or a {label.split()[0]} release built"
        f" for sm_{major}{minor} (an older release, or a build from source).",
    )


def unsupported_arch(view: View) -> list[Finding]:
    """UNSUPPORTED_ARCH per (framework, GPU) pair where the build lacks native code."""
    if view.driver_state != "ok":
        return []
    findings = []
    for framework in ("tensorflow", "torch"):
        archs = _arch_list(view, framework)
        if not archs:
            continue
        for gpu in view.gpus:
            if gpu.compute_capability is None:
                continue
            how = support(gpu.compute_capability, archs)
            if how != "native":
                findings.append(_finding(view, framework, gpu, archs, how))
    return findings
