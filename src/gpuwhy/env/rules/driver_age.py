"""DRIVER_TOO_OLD: the driver is older than the CUDA a framework was built with.

NVIDIA CUDA compatibility (references.md#cuda-driver-table): a driver runs applications of any CUDA
it supports (`nvmlSystemGetCudaDriverVersion`, e.g. 12080 = 12.8) and, through minor-version
compatibility, any 1x.y of its own major family if it is at least that family's minimum (13.x >=
580, 12.x >= 525, 11.x >= 450.80.02) — "with limited feature-set": PTX of a newer toolkit cannot be
JIT-compiled (cudaErrorUnsupportedPtxVersion). Across majors there is no compatibility.
Hence: error below the family (or across majors), warning inside it but below the release's own
minimum (Table 3).
"""

from __future__ import annotations

from typing import Any

from gpuwhy.env import codes
from gpuwhy.env.rules.builds import CudaBuild, cuda_builds
from gpuwhy.env.rules.view import View
from gpuwhy.env.tables import (
    driver_for_cuda,
    family_minimum_driver,
    load_table,
    parse_version,
    version_text,
)
from gpuwhy.model import Finding, Severity


def _alternative(view: View, build: CudaBuild, driver_cuda: tuple[int, int]) -> str:
    """A framework build this driver can run, where the tables name one."""
    if build.framework == "tensorflow":
        for row in load_table("frameworks.json")["tensorflow"]["builds"]:
            cuda = parse_version(row["cuda"])[:2]
            # tensorflow[and-cuda] exists from 2.14; the Python range must include the target's.
            low, high = (parse_version(p) for p in row["python"].split("-"))
            python_ok = not view.python_version or low <= view.python_version[:2] <= high
            if cuda <= driver_cuda and parse_version(row["version"]) >= (2, 14) and python_ok:
                spec = f'"tensorflow[and-cuda]=={row["version"]}.*"'
                command = view.pip("install " + spec)
                return f", or use TensorFlow {row['version']} (CUDA {row['cuda']}): {command}"
        return ""
    if build.framework == "torch":
        return (
            f", or install a PyTorch build for CUDA <= {version_text(driver_cuda)}"
            f" (--index-url https://download.pytorch.org/whl/cu{driver_cuda[0]}{driver_cuda[1]}"
            " or the nearest lower variant pytorch.org lists)"
        )
    if build.framework == "jax" and driver_cuda[0] == 12 and build.cuda == "13":
        command = view.pip('install "jax[cuda12]"')
        return f", or use the CUDA 12 plugin: {command}"
    return ""


def _check(view: View, build: CudaBuild) -> Finding | None:
    driver = view.driver_version
    driver_cuda = view.driver_cuda
    needed = parse_version(build.cuda)
    if not driver or not needed:
        return None
    family_min = family_minimum_driver(needed[0], view.os_key)
    exact = driver_for_cuda(build.cuda, view.os_key) if len(needed) >= 2 else None
    below_family = family_min is not None and parse_version(driver) < parse_version(family_min)
    across_major = driver_cuda is not None and driver_cuda[0] < needed[0]
    below_release = (
        driver_cuda is not None and len(needed) >= 2 and driver_cuda < (needed[0], needed[1])
    ) or (
        exact is not None
        and exact.driver is not None
        and exact.exact
        and parse_version(driver) < parse_version(exact.driver)
    )
    if not (below_family or across_major or below_release):
        return None
    severity = Severity.ERROR if (below_family or across_major) else Severity.WARNING
    required = exact.driver if exact is not None and exact.driver else family_min
    cuda_text = f" (CUDA {version_text(driver_cuda)})" if driver_cuda else ""
    evidence: dict[str, Any] = {
        "framework": build.framework,
        "framework_build": build.label,
        "build_cuda": build.cuda,
        "build_cuda_source": build.source,
        "driver_version": driver,
        "driver_cuda": version_text(driver_cuda) if driver_cuda else None,
        "required_driver": required,
        "required_driver_exact": bool(exact and exact.exact),
        "family_minimum_driver": family_min,
    }
    what = f"Driver {driver}{cuda_text} is too old for {build.label}, built with CUDA {build.cuda}"
    row = f" (minimum for CUDA {exact.source_cuda})" if exact and exact.source_cuda else ""
    if exact is not None and not exact.exact and exact.source_cuda:
        row = f" (minimum for CUDA {exact.source_cuda}; CUDA {build.cuda} may need newer)"
    fix = f"Upgrade the NVIDIA driver to >= {required}{row}"
    if severity is Severity.WARNING:
        title = f"{what}: it runs through CUDA minor-version compatibility, with limits"
        fix += " to lift the limits (PTX from a newer toolkit fails to JIT-compile)"
    else:
        title = what
        if driver_cuda is not None:
            fix += _alternative(view, build, driver_cuda)
    return Finding(codes.DRIVER_TOO_OLD, severity, title, evidence, fix + ".")


def driver_too_old(view: View) -> list[Finding]:
    """DRIVER_TOO_OLD per CUDA build, when NVML gave the driver version (a GPU or not)."""
    if view.driver_state not in ("ok", "no_gpu"):
        return []
    findings = [_check(view, build) for build in cuda_builds(view)]
    return [f for f in findings if f is not None]
