"""The terminal report of `gpuwhy doctor`: what was checked, findings by severity, verdicts.

Built from `Text` objects, never markup strings: fixes such as ``"tensorflow[and-cuda]"`` contain
brackets that rich markup would eat. Colour only where the console decides it may (a terminal,
no NO_COLOR); commands are printed with soft wrapping so a copied line stays one line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.text import Text

from gpuwhy.model import Finding, Severity

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_MARK = {Severity.ERROR: "✗", Severity.WARNING: "!", Severity.INFO: "i"}
_HEADING = {Severity.ERROR: "Errors", Severity.WARNING: "Warnings", Severity.INFO: "Info"}
_MAX_EVIDENCE_CHARS = 400


def _section(facts: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = facts.get(name)
    return value if isinstance(value, dict) else {}


def _machine_line(facts: Mapping[str, Any]) -> str:
    system, python = _section(facts, "system"), _section(facts, "python")
    where = [str(system.get("os") or "?"), str(system.get("machine") or "")]
    if system.get("wsl"):
        where.append("WSL")
    if system.get("container"):
        where.append(f"{system['container']} container")
    version = f"Python {python['version']}" if python.get("version") else "Python ?"
    return f"{python.get('executable') or '?'} ({version}) on {' '.join(w for w in where if w)}"


def _driver_line(facts: Mapping[str, Any]) -> str:
    nvml = _section(facts, "nvml")
    status = nvml.get("status")
    if status not in ("ok", "no_gpu"):
        return f"none usable (NVML: {nvml.get('error') or status})"
    cuda = nvml.get("cuda_driver_version")
    text = f"{nvml.get('driver_version') or '?'}"
    if isinstance(cuda, int):
        text += f" (CUDA {cuda // 1000}.{(cuda % 1000) // 10})"
    gpus = [d for d in nvml.get("devices") or [] if isinstance(d, dict)]
    names = ", ".join(
        f"{d.get('index')}: {d.get('name')}"
        + (
            f" sm_{d['compute_capability'][0]}{d['compute_capability'][1]}"
            if isinstance(d.get("compute_capability"), list) and len(d["compute_capability"]) == 2
            else ""
        )
        for d in gpus
    )
    count = nvml.get("device_count", len(gpus))
    return f"{text}, {count} GPU(s)" + (f": {names}" if names else "")


def _framework_line(facts: Mapping[str, Any]) -> str:
    parts = []
    for name, probe in _section(facts, "frameworks").items():
        if not isinstance(probe, dict):
            continue
        state = probe.get("probe")
        if state == "ok" and probe.get("imported"):
            parts.append(f"{name} {probe.get('version')} ({probe.get('elapsed_s')} s)")
        elif state == "ok":
            parts.append(f"{name} (import failed)")
        else:
            parts.append(f"{name} ({state})")
    return ", ".join(parts) or "none installed"


def _evidence_text(evidence: Mapping[str, Any]) -> str:
    items = []
    for key, value in evidence.items():
        if value in (None, [], {}, ""):
            continue
        items.append(f"{key}={value}")
    text = "; ".join(items)
    return text if len(text) <= _MAX_EVIDENCE_CHARS else text[: _MAX_EVIDENCE_CHARS - 1] + "…"


def _finding(console: Console, finding: Finding) -> None:
    head = Text("  ")
    head.append(f"{_MARK[finding.severity]} {finding.code}", style=_STYLE[finding.severity])
    head.append(f"  {finding.title}")
    console.print(head)
    evidence = _evidence_text(finding.evidence)
    if evidence:
        console.print(Text(f"      evidence: {evidence}", style="dim"))
    console.print(Text("      fix: ").append(finding.fix, style="bold"))


def render_doctor(
    facts: Mapping[str, Any],
    findings: Sequence[Finding],
    verdict_lines: Sequence[str],
    console: Console,
) -> None:
    """Print the doctor report: the context, findings grouped by severity, one verdict per line."""
    console.print(Text("gpuwhy doctor", style="bold"))
    console.print(Text(f"  interpreter: {_machine_line(facts)}"))
    console.print(Text(f"  driver:      {_driver_line(facts)}"))
    console.print(Text(f"  frameworks:  {_framework_line(facts)}"))
    for severity in (Severity.ERROR, Severity.WARNING, Severity.INFO):
        group = [f for f in findings if f.severity is severity]
        if not group:
            continue
        console.print()
        console.print(Text(f"{_HEADING[severity]} ({len(group)})", style=_STYLE[severity]))
        for finding in group:
            _finding(console, finding)
    if not findings:
        console.print()
        console.print(Text("No problems found.", style="green"))
    console.print()
    console.print(Text("Verdict", style="bold"))
    for line in verdict_lines:
        console.print(Text(f"  {line}"))
