"""FRAMEWORK_NO_GPU: a GPU answers, the build is GPU-capable, yet the framework lists no GPU and
no other finding explains why. The framework's own log lines are the evidence.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuwhy.env import codes
from gpuwhy.env.rules.builds import cpu_only, installed
from gpuwhy.env.rules.view import View
from gpuwhy.model import Finding, Severity

_CHECKS = {
    "tensorflow": 'TF_CPP_MIN_LOG_LEVEL=0 {py} -c "import tensorflow as tf;'
    " print(tf.config.list_physical_devices('GPU'))\"",
    "torch": '{py} -c "import torch; print(torch.cuda.is_available())"',
    "jax": '{py} -c "import jax; print(jax.devices())"',
}


def _gpus_seen(framework: str, probe: dict[str, object]) -> int:
    if framework == "tensorflow":
        gpus = probe.get("gpus")
        return len(gpus) if isinstance(gpus, list) else 0
    if framework == "torch":
        count = probe.get("device_count")
        return count if isinstance(count, int) else 0
    devices = probe.get("devices")
    if not isinstance(devices, list):
        return 0
    return sum(1 for d in devices if isinstance(d, dict) and d.get("platform") in ("gpu", "cuda"))


def framework_no_gpu(view: View, explained: Sequence[Finding]) -> list[Finding]:
    """The catch-all, after every other rule: `explained` are the findings already made."""
    if view.driver_state != "ok":
        return []
    findings = []
    for framework in installed(view):
        probe = view.imported(framework)
        if probe is None or cpu_only(view, framework) is not False:
            continue
        if _gpus_seen(framework, probe) > 0:
            continue
        if any(
            f.severity is Severity.ERROR and f.evidence.get("framework") in (None, framework)
            for f in explained
        ):
            continue
        label = view.framework_label(framework)
        findings.append(
            Finding(
                codes.FRAMEWORK_NO_GPU,
                Severity.ERROR,
                f"{label} finds no GPU although the driver reports {view.gpu_count}",
                {
                    "framework": framework,
                    "gpus_on_machine": view.gpu_count,
                    "log": [str(x) for x in probe.get("log", [])][:8],
                },
                "Read the framework's log lines in the evidence; to see them all run "
                + _CHECKS[framework].format(py=view.python_executable),
            )
        )
    return findings
