"""What each installed framework was built for: CUDA (which version) or CPU only.

The probe's own answer wins (TensorFlow's build info, ``torch.version.cuda``, JAX's plugins); when
a probe failed or timed out, the distribution names and versions and the tables stand in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuwhy.env.rules.view import View
from gpuwhy.env.tables import framework_table, parse_version, tensorflow_build

FRAMEWORKS = ("tensorflow", "torch", "jax")


@dataclass(frozen=True)
class CudaBuild:
    """A framework build that runs on CUDA."""

    framework: str
    label: str  # "TensorFlow 2.21.0"
    cuda: str  # "12.5.1", "13.2", or only the major ("12") for a JAX plugin
    source: str  # where the CUDA version was read


def installed(view: View) -> list[str]:
    """The frameworks installed in the target environment, probed or not."""
    found = []
    for name in FRAMEWORKS:
        module = "jaxlib" if name == "jax" else name
        if view.framework(name) or view.providers(module) or (name == "jax" and view.dist("jax")):
            found.append(name)
    return found


def jax_cuda_plugins(view: View) -> dict[str, str]:
    """Installed JAX CUDA plugins, name -> CUDA major."""
    majors: dict[str, str] = framework_table("jax")["cuda_plugins"]
    probe = view.framework("jax") or {}
    plugins = probe.get("plugins") if isinstance(probe.get("plugins"), dict) else {}
    names = set(view.distributions) | set(plugins or {})
    return {name: majors[name] for name in sorted(names) if name in majors}


def _tensorflow(view: View) -> CudaBuild | None:
    label = view.framework_label("tensorflow")
    probe = view.imported("tensorflow")
    if probe is not None:
        info = probe.get("build_info") if isinstance(probe.get("build_info"), dict) else {}
        cuda = (info or {}).get("cuda_version")
        if (info or {}).get("is_cuda_build") and cuda:
            return CudaBuild("tensorflow", label, str(cuda), "tf.sysconfig.get_build_info()")
        return None
    if cpu_only(view, "tensorflow") is not False or view.platform != "linux":
        return None
    row = tensorflow_build(view.framework_version("tensorflow"))
    if row is None:
        return None
    return CudaBuild("tensorflow", label, str(row["cuda"]), "TensorFlow's tested build table")


def _torch(view: View) -> CudaBuild | None:
    label = view.framework_label("torch")
    probe = view.imported("torch")
    if probe is not None:
        cuda = probe.get("cuda")
        return CudaBuild("torch", label, str(cuda), "torch.version.cuda") if cuda else None
    version = view.framework_version("torch") or ""
    tag = re.search(r"\+cu(\d+)(\d)$", version)  # "+cu128" -> 12.8
    if tag:
        return CudaBuild("torch", label, f"{tag.group(1)}.{tag.group(2)}", "the wheel's +cu tag")
    if "+" not in version and view.platform == "linux" and version:
        since = parse_version(framework_table("torch")["pypi_linux_cuda13_from"])
        if parse_version(version)[:2] >= since:
            return CudaBuild("torch", label, "13", "PyPI's Linux wheel (CUDA 13 since torch 2.11)")
    return None


def _jax(view: View) -> CudaBuild | None:
    plugins = jax_cuda_plugins(view)
    if not plugins or (not view.framework("jax") and not view.dist("jax")):
        return None
    major = max(plugins.values(), key=int)
    return CudaBuild("jax", view.framework_label("jax"), major, "installed jax-cuda plugin")


def cuda_builds(view: View) -> list[CudaBuild]:
    """The installed frameworks that are CUDA builds, with the CUDA each was built with."""
    builds = [_tensorflow(view), _torch(view), _jax(view)]
    return [b for b in builds if b is not None]


def cpu_only(view: View, framework: str) -> bool | None:
    """True for a CPU-only build, False for a GPU-capable one, None when it cannot be told."""
    if framework == "tensorflow":
        probe = view.imported("tensorflow")
        if probe is not None:
            info = probe.get("build_info") if isinstance(probe.get("build_info"), dict) else None
            if info is None:
                return None
            return not (info.get("is_cuda_build") or info.get("is_rocm_build"))
        providers = view.providers("tensorflow")
        cpu_names = set(framework_table("tensorflow")["cpu_only_distributions"])
        if providers and all(p in cpu_names for p in providers):
            return True
        return False if providers else None
    if framework == "torch":
        probe = view.imported("torch")
        if probe is not None:
            return not (probe.get("cuda") or probe.get("hip"))
        version = view.framework_version("torch") or ""
        if "+cpu" in version:
            return True
        return False if "+cu" in version or "+rocm" in version else None
    probe = view.imported("jax")
    if probe is not None and str(probe.get("default_backend")) in ("gpu", "cuda", "rocm"):
        return False
    rocm = any(name.startswith("jax-rocm") for name in view.distributions)
    return not (jax_cuda_plugins(view) or rocm)
