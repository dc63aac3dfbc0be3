"""GPUS_HIDDEN: a variable hides every GPU from the frameworks.

CUDA_VISIBLE_DEVICES (CUDA Programming Guide, "CUDA Environment Variables"): an empty value hides
every device; entries are indices or (prefixes of) GPU-/MIG- UUIDs; at the first invalid entry
the list stops, so "-1" or "-1,0" hide everything. NVML ignores the variable
(references.md#nvml-init), so the GPUs it lists are the machine's. JAX_PLATFORMS / JAX_PLATFORM_NAME
without cuda/gpu keep JAX on the CPU (references.md#jax-builds).
"""

from __future__ import annotations

from typing import Any

from gpuwhy.env import codes
from gpuwhy.env.rules.builds import installed
from gpuwhy.env.rules.view import Gpu, View
from gpuwhy.model import Finding, Severity


def visible_entries(value: str, gpus: list[Gpu] | None) -> tuple[list[str], str | None]:
    """(the entries CUDA accepts, the first entry that stops the list or None).

    With `gpus` None (no driver to ask) only the syntax can be judged.
    """
    accepted: list[str] = []
    if not value.strip():
        return accepted, ""
    uuids = [] if gpus is None else [u for g in gpus for u in (g.uuid, *g.mig_devices) if u]
    for raw in value.split(","):
        entry = raw.strip()
        if entry.isdigit():
            valid = gpus is None or int(entry) < len(gpus)
        elif entry.startswith("MIG-GPU-"):  # the older MIG-<GPU UUID>/<GI>/<CI> form
            parent = entry[len("MIG-") :].split("/")[0]
            valid = gpus is None or sum(u.startswith(parent) for u in uuids) == 1
        elif entry.startswith(("GPU-", "MIG-")):
            valid = gpus is None or sum(u.startswith(entry) for u in uuids) == 1
        else:
            valid = False
        if not valid:
            return accepted, entry
        accepted.append(entry)
    return accepted, None


def _cuda_visible_devices(view: View) -> list[Finding]:
    value = view.env("CUDA_VISIBLE_DEVICES")
    if value is None or not installed(view):
        return []
    gpus = view.gpus if view.driver_state == "ok" else None
    accepted, stopper = visible_entries(value, gpus)
    if accepted:
        return []
    evidence: dict[str, Any] = {
        "CUDA_VISIBLE_DEVICES": value,
        "first_invalid_entry": stopper,
        "gpus_on_machine": len(gpus) if gpus is not None else None,
    }
    if gpus:
        names = ", ".join(f"{g.index}" for g in gpus)
        title = (
            f"CUDA_VISIBLE_DEVICES={value!r} names no GPU of this machine (it has"
            f" {len(gpus)}: index {names}): every GPU is hidden from CUDA"
        )
        fix = (
            "unset CUDA_VISIBLE_DEVICES, or set it to GPUs that exist, e.g."
            f" CUDA_VISIBLE_DEVICES={gpus[0].index}"
        )
    else:
        title = f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU from CUDA frameworks"
        fix = "unset CUDA_VISIBLE_DEVICES (or set it to the GPUs to use: CUDA_VISIBLE_DEVICES=0)"
    fix += "; look for it in your shell profile, job script, container spec or os.environ in code."
    return [Finding(codes.GPUS_HIDDEN, Severity.ERROR, title, evidence, fix)]


def _jax_platforms(view: View) -> list[Finding]:
    if "jax" not in installed(view):
        return []
    findings = []
    for name in ("JAX_PLATFORMS", "JAX_PLATFORM_NAME"):
        value = view.env(name)
        if value is None or not value.strip():
            continue
        platforms = {p.strip().lower() for p in value.split(",")}
        if platforms & {"cuda", "gpu", "rocm"}:
            continue
        findings.append(
            Finding(
                codes.GPUS_HIDDEN,
                Severity.ERROR,
                f"{name}={value} keeps JAX off the GPU",
                {name: value, "framework": "jax"},
                f"unset {name} (or set {name}=cuda,cpu).",
            )
        )
    return findings


def gpus_hidden(view: View) -> list[Finding]:
    """GPUS_HIDDEN for CUDA_VISIBLE_DEVICES (every CUDA framework) and JAX's platform variables."""
    return _cuda_visible_devices(view) + _jax_platforms(view)
