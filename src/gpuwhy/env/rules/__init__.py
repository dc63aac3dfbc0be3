"""The environment rules: pure functions from facts to findings.

Root causes first: each rule checks its own preconditions, so a machine without a driver gets
NO_DRIVER and the problems that stand on their own (a CPU-only build, conflicting packages, a
variable hiding the GPUs), not the consequences of the missing driver (libraries that cannot be
tried, architectures of GPUs nobody can see).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuwhy.env.rules.arch import unsupported_arch
from gpuwhy.env.rules.cpu_builds import cpu_only_builds
from gpuwhy.env.rules.distributions import conflicting_packages, deprecated_packages
from gpuwhy.env.rules.driver import mig, no_driver, no_gpu
from gpuwhy.env.rules.driver_age import driver_too_old
from gpuwhy.env.rules.framework_gpu import framework_no_gpu
from gpuwhy.env.rules.libraries import missing_cuda_libs
from gpuwhy.env.rules.probes import import_failures, timeouts
from gpuwhy.env.rules.tf_memory import tf_memory_growth
from gpuwhy.env.rules.view import View
from gpuwhy.env.rules.visibility import gpus_hidden
from gpuwhy.model import Finding, sort_findings

RULES = (
    no_driver,
    no_gpu,
    mig,
    gpus_hidden,
    import_failures,
    timeouts,
    cpu_only_builds,
    deprecated_packages,
    conflicting_packages,
    driver_too_old,
    missing_cuda_libs,
    unsupported_arch,
    tf_memory_growth,
)


def evaluate(facts: Mapping[str, Any]) -> list[Finding]:
    """Findings for a facts document, most important first. Pure: no I/O, no clock."""
    view = View(facts)
    findings: list[Finding] = []
    for rule in RULES:
        findings.extend(rule(view))
    findings.extend(framework_no_gpu(view, findings))
    return sort_findings(findings)


__all__ = ["evaluate"]
