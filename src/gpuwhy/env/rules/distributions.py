"""DEPRECATED_PACKAGE and CONFLICTING_PACKAGES: what pip put in the environment.

Two distributions that ship the same module (tensorflow and tensorflow-cpu both install
``tensorflow/``) overwrite each other's files: the build that imports is whichever was installed
last, and uninstalling either deletes files the other needs. Deprecations: tensorflow-gpu was
removed from PyPI in December 2022 (pypi.org/project/tensorflow-gpu, references.md#tf-install).
"""

from __future__ import annotations

from gpuwhy.env import codes
from gpuwhy.env.rules.builds import cpu_only
from gpuwhy.env.rules.fixes import pinned, tensorflow_gpu_install, torch_gpu_install
from gpuwhy.env.rules.view import View
from gpuwhy.env.tables import framework_table
from gpuwhy.model import Finding, Severity

_MODULE_FRAMEWORK = {"tensorflow": "tensorflow", "torch": "torch", "jaxlib": "jax"}


def deprecated_packages(view: View) -> list[Finding]:
    """DEPRECATED_PACKAGE for each removed distribution still installed."""
    findings = []
    reasons = framework_table("tensorflow")["deprecated_distributions"]
    for name, reason in reasons.items():
        version = view.dist_version(name)
        if version is None:
            continue
        others = [p for p in view.providers("tensorflow") if p != name]
        if view.is_windows:
            install = view.pip("install " + pinned("tensorflow", None))
            fix = f"{view.pip('uninstall -y ' + name)} && {install}"
        else:
            fix = tensorflow_gpu_install(view, uninstall=[name, *others])
        findings.append(
            Finding(
                codes.DEPRECATED_PACKAGE,
                Severity.WARNING,
                f"{name} {version} is a removed package: install tensorflow instead",
                {
                    "distribution": name,
                    "version": version,
                    "framework": "tensorflow",
                    "reason": reason,
                },
                fix,
            )
        )
    return findings


def _conflict_fix(view: View, framework: str, names: list[str]) -> str:
    if framework == "tensorflow" and not view.is_windows and not view.is_macos:
        return tensorflow_gpu_install(view, uninstall=names)
    if framework == "torch":
        return f"{view.pip('uninstall -y ' + ' '.join(names))} && {torch_gpu_install(view)}"
    keep = "tensorflow" if framework == "tensorflow" else names[0]
    return f"{view.pip('uninstall -y ' + ' '.join(names))} && {view.pip('install ' + keep)}"


def conflicting_packages(view: View) -> list[Finding]:
    """CONFLICTING_PACKAGES: one module from several distributions, or a shadowed second copy.

    Severity: error when the build that imports is CPU-only or unknown (the GPU cannot be used),
    warning when it is a GPU build (usable today, broken by the next pip uninstall).
    """
    findings = []
    for module, framework in _MODULE_FRAMEWORK.items():
        names = view.providers(module)
        shadowed = {
            n: (view.dist(n) or {}).get("shadowed_versions")
            for n in names
            if (view.dist(n) or {}).get("shadowed_versions")
        }
        if len(names) < 2 and not shadowed:
            continue
        versions = {n: view.dist_version(n) for n in names}
        gpu_build = cpu_only(view, framework) is False
        if len(names) >= 2:
            listed = " and ".join(f"{n} {versions[n]}" for n in names)
            title = f"{listed} are installed together: both install the '{module}' module"
        else:
            name = names[0]
            title = (
                f"Two copies of {name} are installed ({versions[name]} shadows {shadowed[name]})"
            )
        findings.append(
            Finding(
                codes.CONFLICTING_PACKAGES,
                Severity.WARNING if gpu_build else Severity.ERROR,
                title,
                {
                    "framework": framework,
                    "module": module,
                    "distributions": versions,
                    "shadowed_versions": shadowed,
                    "importable_build_is_gpu": gpu_build,
                },
                _conflict_fix(view, framework, names),
            )
        )
    return findings
