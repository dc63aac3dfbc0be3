"""CPU_ONLY_BUILD: an installed framework cannot use a GPU whatever the driver.

Sources: TensorFlow's build info (`is_cuda_build`, references.md#tf-build-info; the plain Linux
wheel is a CUDA build, references.md#tf-build-info); native Windows TensorFlow >= 2.11 has no GPU
support (tensorflow.org pip guide, references.md#tf-install);
`torch.version.cuda is None` on CPU wheels (references.md#torch-builds); JAX needs a jax-cuda plugin
(references.md#jax-builds); macOS has no CUDA at all.
"""

from __future__ import annotations

from typing import Any

from gpuwhy.env import codes
from gpuwhy.env.rules.builds import cpu_only, installed
from gpuwhy.env.rules.fixes import (
    jax_gpu_install,
    pinned,
    python_at_most,
    tensorflow_gpu_install,
    torch_gpu_install,
)
from gpuwhy.env.rules.view import View
from gpuwhy.env.tables import framework_table, parse_version, tensorflow_build
from gpuwhy.model import Finding, Severity

_MACOS = "macOS has no CUDA"


def _evidence(view: View, framework: str) -> dict[str, Any]:
    module = "jaxlib" if framework == "jax" else framework
    names = view.providers(module) + (["jax"] if framework == "jax" and view.dist("jax") else [])
    evidence: dict[str, Any] = {
        "framework": framework,
        "version": view.framework_version(framework),
        "distributions": {n: view.dist_version(n) for n in names},
        "platform": view.platform,
    }
    probe = view.imported(framework) or {}
    if framework == "tensorflow" and isinstance(probe.get("build_info"), dict):
        info = probe["build_info"]
        evidence["is_cuda_build"] = info.get("is_cuda_build", False)
    if framework == "torch" and probe:
        evidence["torch_version_cuda"] = probe.get("cuda")
        evidence["mps_available"] = probe.get("mps_available")
    if framework == "jax" and probe:
        evidence["default_backend"] = probe.get("default_backend")
    return evidence


def _tensorflow(view: View) -> tuple[str, str] | None:
    label = view.framework_label("tensorflow")
    version = view.framework_version("tensorflow")
    if view.is_macos:
        return (
            f"{label} cannot use an NVIDIA GPU: {_MACOS}",
            "For the Apple GPU install Apple's Metal plugin:"
            f" {view.pip('install tensorflow-metal')};"
            " for an NVIDIA GPU, train on Linux or WSL2.",
        )
    last = framework_table("tensorflow")["last_native_windows_gpu"]
    if view.is_windows and parse_version(version)[:2] > parse_version(last)[:2]:
        fix = f"Use WSL2 and install there: pip install {pinned('tensorflow[and-cuda]', version)}."
        old = tensorflow_build(last) or {}
        if python_at_most(view, "3.10"):  # TensorFlow 2.10 supports Python 3.7-3.10
            downgrade = view.pip('install "tensorflow<2.11"')
            fix += (
                f" Or stay on native Windows with TensorFlow {last}: {downgrade} (it needs CUDA"
                f" {old.get('cuda')} and cuDNN {old.get('cudnn')} installed)."
            )
        title = f"{label} has no GPU support on native Windows (TensorFlow {last} was the last)"
        return (title, fix)
    if cpu_only(view, "tensorflow") is not True:
        return None
    providers = view.providers("tensorflow")
    if view.is_windows:
        install = view.pip("install " + pinned("tensorflow", version))
        fix = f"{view.pip('uninstall -y ' + ' '.join(providers))} && {install}"
    else:
        fix = tensorflow_gpu_install(view, uninstall=providers)
    return (f"{label} is a CPU-only build ({', '.join(providers) or 'tensorflow'})", fix)


def _torch(view: View) -> tuple[str, str] | None:
    label = view.framework_label("torch")
    if view.is_macos:
        return (
            f"{label} cannot use an NVIDIA GPU: {_MACOS}",
            "On Apple silicon use PyTorch's Metal backend: torch.device('mps'); for an NVIDIA GPU,"
            " train on Linux or WSL2.",
        )
    if cpu_only(view, "torch") is not True:
        return None
    return (f"{label} is a CPU-only build (torch.version.cuda is None)", torch_gpu_install(view))


def _jax(view: View) -> tuple[str, str] | None:
    label = view.framework_label("jax")
    if view.is_macos:
        return (
            f"{label} cannot use an NVIDIA GPU: {_MACOS}",
            "For the Apple GPU there is the experimental Metal plugin:"
            f" {view.pip('install jax-metal')};"
            " for an NVIDIA GPU, train on Linux or WSL2.",
        )
    if cpu_only(view, "jax") is not True:
        return None
    if view.is_windows:
        return (
            f"{label} is CPU-only: JAX's CUDA builds are for Linux (and WSL2)",
            'Use WSL2 and install there: pip install "jax[cuda12]".',
        )
    return (
        f"{label} is CPU-only: no jax-cuda12-plugin or jax-cuda13-plugin is installed",
        jax_gpu_install(view),
    )


def cpu_only_builds(view: View) -> list[Finding]:
    """One CPU_ONLY_BUILD per framework that cannot use a GPU on this platform."""
    findings = []
    rules = {"tensorflow": _tensorflow, "torch": _torch, "jax": _jax}
    for framework in installed(view):
        found = rules[framework](view)
        if found is not None:
            title, fix = found
            evidence = _evidence(view, framework)
            findings.append(Finding(codes.CPU_ONLY_BUILD, Severity.ERROR, title, evidence, fix))
    return findings
