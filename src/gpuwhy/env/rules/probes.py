"""FRAMEWORK_IMPORT_FAILED, MISSING_CUDA_LIBS (at import) and PROBE_TIMED_OUT: probes that could
not look. An import that fails on a missing CUDA library is MISSING_CUDA_LIBS even without a
driver (the framework cannot run even on the CPU) — unless the library is libcuda, which the
driver provides (then NO_DRIVER is the cause).
"""

from __future__ import annotations

from gpuwhy.env import codes
from gpuwhy.env.rules.builds import installed
from gpuwhy.env.rules.fixes import base_version, pinned
from gpuwhy.env.rules.libraries import missing_library_names
from gpuwhy.env.rules.view import View
from gpuwhy.model import Finding, Severity

_DISTRIBUTION = {"tensorflow": "tensorflow", "torch": "torch", "jax": "jax"}
_CHECK = {
    "tensorflow": "import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))",
    "torch": "import torch; print(torch.cuda.is_available())",
    "jax": "import jax; print(jax.devices())",
}


def _reinstall(view: View, framework: str) -> str:
    names = view.providers("tensorflow") if framework == "tensorflow" else []
    name = names[0] if names else _DISTRIBUTION[framework]
    version = base_version(view.dist_version(name) or view.framework_version(framework))
    return view.pip(f"install --force-reinstall {pinned(name, version)}")


def import_failures(view: View) -> list[Finding]:
    """A framework that is installed but cannot be imported."""
    findings = []
    for framework in installed(view):
        probe = view.framework(framework) or {}
        label = view.framework_label(framework)
        if probe.get("probe") == "failed":  # the interpreter died importing it (a crash)
            findings.append(
                Finding(
                    codes.FRAMEWORK_IMPORT_FAILED,
                    Severity.ERROR,
                    f"Importing {label} crashed the interpreter",
                    {
                        "framework": framework,
                        "import_error": probe.get("error"),
                        "exit_status": probe.get("exit_status"),
                        "log": probe.get("log", [])[:5],
                    },
                    _reinstall(view, framework),
                )
            )
            continue
        error = probe.get("import_error")
        if probe.get("probe") != "ok" or probe.get("imported") or not error:
            continue
        missing = missing_library_names(str(error))
        evidence = {"framework": framework, "import_error": str(error), "missing": missing}
        if missing and missing != ["libcuda.so.1"]:
            findings.append(
                Finding(
                    codes.MISSING_CUDA_LIBS,
                    Severity.ERROR,
                    f"{label} cannot be imported: {', '.join(missing)} cannot be loaded",
                    evidence,
                    _reinstall(view, framework) + " (brings the nvidia-* library wheels)",
                )
            )
        elif not missing or view.driver_state != "no_driver":
            findings.append(
                Finding(
                    codes.FRAMEWORK_IMPORT_FAILED,
                    Severity.ERROR,
                    f"{label} is installed but cannot be imported",
                    evidence,
                    _reinstall(view, framework),
                )
            )
    return findings


def timeouts(view: View) -> list[Finding]:
    """PROBE_TIMED_OUT for each probe killed at its time-out (TensorFlow's cuInit can hang)."""
    findings = []
    for framework in installed(view):
        probe = view.framework(framework) or {}
        if probe.get("probe") != "timed_out":
            continue
        label = view.framework_label(framework)
        check = f'{view.python_executable} -c "{_CHECK[framework]}"'
        findings.append(
            Finding(
                codes.PROBE_TIMED_OUT,
                Severity.WARNING,
                f"Checking {label} did not finish: {probe.get('error') or 'probe timed out'}",
                {
                    "framework": framework,
                    "probe": "timed_out",
                    "elapsed_s": probe.get("elapsed_s"),
                    "log": probe.get("log", [])[:5],
                },
                f"Run {check} to see where it hangs (a hung cuInit points at the driver: check"
                " nvidia-smi), or give doctor more time with --timeout.",
            )
        )
    for section, what in (("nvml", "the NVIDIA driver (NVML)"), ("python", "the interpreter")):
        data = view.facts.get(section)
        if isinstance(data, dict) and "timed_out" in (data.get("status"), data.get("probe")):
            findings.append(
                Finding(
                    codes.PROBE_TIMED_OUT,
                    Severity.WARNING,
                    f"Checking {what} did not finish in time",
                    {"probe": section, "error": data.get("error")},
                    "Run nvidia-smi to see whether the driver answers; "
                    "retry with a larger --timeout.",
                )
            )
    return findings
