"""MISSING_CUDA_LIBS: a CUDA library a build needs cannot be loaded.

Evidence, best first: the framework's own words (TensorFlow: "Cannot dlopen some GPU libraries",
references.md#tf-build-info; JAX: "CUDA backend failed to initialize", references.md#jax-builds; an
import that fails on a missing .so); then the loader itself (ctypes and the pip nvidia-* wheels the
frameworks find through their RPATH). Only judged where a GPU answers: with no driver or no GPU this
is secondary (NO_DRIVER / NO_GPU is the root cause), except an import failure, which stops even CPU
use. libcuda itself belongs to the driver: NVML working without it is a container started without
the 'compute' capability (NVIDIA Container Toolkit: NVIDIA_DRIVER_CAPABILITIES, default 'utility').
"""

from __future__ import annotations

import re
from typing import Any

from gpuwhy.env import codes
from gpuwhy.env.rules.builds import CudaBuild, cuda_builds, jax_cuda_plugins
from gpuwhy.env.rules.fixes import base_version, jax_gpu_install, pinned, tensorflow_gpu_install
from gpuwhy.env.rules.view import View
from gpuwhy.env.tables import parse_version
from gpuwhy.model import Finding, Severity

LIBRARY_NAME = re.compile(
    r"\b(lib(?:cuda|cudart|cublas|cublasLt|cudnn\w*|cufft|curand|cusolver|cusparse\w*|nccl|nvrtc"
    r"|nvJitLink|cupti|nvToolsExt|nvshmem\w*)\.so[.\d]*|\w*(?:cudart|cublas|cudnn|nvcuda)\w*\.dll)"
)
_TF_DLOPEN = re.compile(r"Cannot dlopen some GPU libraries|Could not load dynamic library")
_JAX_FAILED = re.compile(r"CUDA backend failed to initialize|Unable to load|cannot open shared")


def missing_library_names(text: str) -> list[str]:
    """Library file names mentioned in a log or an error, in order, without repeats."""
    found: list[str] = []
    for match in LIBRARY_NAME.finditer(text):
        if match.group(1) not in found:
            found.append(match.group(1))
    return found


def _needed_sonames(build: CudaBuild, view: View) -> list[str]:
    """The runtime, cuBLAS and cuDNN a CUDA build loads (Linux names)."""
    major = parse_version(build.cuda)[:1]
    if not major:
        return []
    runtime = f"libcudart.so.{major[0]}" if major[0] >= 12 else "libcudart.so.11.0"
    names = [runtime, f"libcublas.so.{major[0]}"]
    probe = view.imported(build.framework) or {}
    info = probe.get("build_info") if isinstance(probe.get("build_info"), dict) else {}
    cudnn = parse_version(str((info or {}).get("cudnn_version") or ""))[:1]
    if build.framework == "jax" or cudnn:
        names.append(f"libcudnn.so.{cudnn[0] if cudnn else 9}")
    return names


def _fix(view: View, build: CudaBuild) -> str:
    if build.framework == "tensorflow":
        return tensorflow_gpu_install(view)
    if build.framework == "jax":
        return jax_gpu_install(view)
    version = base_version(view.framework_version("torch"))
    command = view.pip(f"install --force-reinstall {pinned('torch', version)}")
    return command + " (brings its nvidia-* wheels)"


def _build_evidence(view: View, build: CudaBuild) -> tuple[list[str], list[str]]:
    """(missing libraries, the framework's log lines that say so) for one CUDA build."""
    if build.framework == "torch":  # torch loads its CUDA libraries at import: an import error says
        return [], []
    probe = view.framework(build.framework) or {}
    log = [str(line) for line in probe.get("log", []) if isinstance(line, str)]
    pattern = _TF_DLOPEN if build.framework == "tensorflow" else _JAX_FAILED
    said = [line for line in log if pattern.search(line)]
    gpus_seen = probe.get("gpus") if build.framework == "tensorflow" else probe.get("devices")
    if build.framework == "jax":
        gpus_seen = [
            d
            for d in probe.get("devices", [])
            if isinstance(d, dict) and d.get("platform") in ("gpu", "cuda")
        ]
    if gpus_seen:  # the framework found its GPU: its libraries loaded
        return [], []
    missing = missing_library_names("\n".join(said))
    if not missing and view.platform == "linux":
        missing = [n for n in _needed_sonames(build, view) if view.library_found(n) is False]
    return missing, said


def _libcuda(view: View) -> list[Finding]:
    found = view.library_found("libcuda.so.1") if view.platform == "linux" else None
    if found is not False and view.nvml.get("libcuda_found") is not False:
        return []
    capabilities = view.env("NVIDIA_DRIVER_CAPABILITIES")
    evidence: dict[str, Any] = {
        "library": "libcuda.so.1",
        "nvml_status": view.nvml_status,
        "container": view.container,
    }
    if view.container:
        evidence["NVIDIA_DRIVER_CAPABILITIES"] = capabilities
        fix = (
            "Start the container with the compute capability: -e"
            " NVIDIA_DRIVER_CAPABILITIES=compute,utility (without it only nvidia-smi/NVML work)."
        )
    else:
        fix = "Reinstall the NVIDIA driver: its libcuda.so.1 is not on the loader path."
    title = "NVML works but libcuda.so.1, the CUDA driver library, cannot be loaded"
    return [Finding(codes.MISSING_CUDA_LIBS, Severity.ERROR, title, evidence, fix)]


def missing_cuda_libs(view: View) -> list[Finding]:
    """MISSING_CUDA_LIBS for libcuda and for each CUDA build's runtime libraries."""
    if view.driver_state != "ok":
        return []
    findings = _libcuda(view)
    if findings:
        return findings  # every build needs libcuda first; its absence is the root cause
    plugins = jax_cuda_plugins(view)
    for build in cuda_builds(view):
        if build.framework == "jax" and not plugins:
            continue
        missing, said = _build_evidence(view, build)
        if not missing and not said:
            continue
        names = ", ".join(missing) or "see the log lines"
        findings.append(
            Finding(
                codes.MISSING_CUDA_LIBS,
                Severity.ERROR,
                f"{build.label} cannot load the CUDA libraries it needs ({names})",
                {
                    "framework": build.framework,
                    "missing": missing,
                    "log": said[:5],
                    "build_cuda": build.cuda,
                },
                _fix(view, build),
            )
        )
    return findings
