"""NO_DRIVER, NO_GPU, MIG_ENABLED, MIG_NO_INSTANCES: is there a driver and a GPU at all?

Thresholds and meanings: references.md#nvml-init (NVML initialisation results), NVIDIA Container
Toolkit docs (NVIDIA_VISIBLE_DEVICES: "void or empty or unset" = no GPU runtime, "none" = driver
without GPUs), CUDA on WSL User Guide (the Windows driver provides libcuda inside WSL2), MIG User
Guide (with MIG on, only MIG instances are CUDA devices).
"""

from __future__ import annotations

from typing import Any

from gpuwhy.env import codes, nvml_status
from gpuwhy.env.rules.builds import cuda_builds
from gpuwhy.env.rules.view import View
from gpuwhy.env.tables import driver_for_cuda, family_minimum_driver, parse_version
from gpuwhy.model import Finding, Severity

_NVIDIA_DOWNLOAD = "https://www.nvidia.com/Download/index.aspx"


def required_driver(view: View) -> tuple[str, str] | None:
    """The newest minimum driver among the installed CUDA builds: (version, 'for what')."""
    best: tuple[str, str] | None = None
    for build in cuda_builds(view):
        parts = parse_version(build.cuda)
        if len(parts) >= 2:
            need = driver_for_cuda(build.cuda, view.os_key).driver
        else:
            need = family_minimum_driver(parts[0], view.os_key) if parts else None
        if need and (best is None or parse_version(need) > parse_version(best[0])):
            best = (need, f"{build.label} is built with CUDA {build.cuda}")
    return best


def _driver_phrase(view: View) -> str:
    need = required_driver(view)
    return f"an NVIDIA driver >= {need[0]} ({need[1]})" if need else "the NVIDIA driver"


def _library_not_found(view: View) -> tuple[str, str]:
    visible = view.env("NVIDIA_VISIBLE_DEVICES")
    if view.is_wsl:
        return (
            "No NVIDIA driver reachable from WSL: libnvidia-ml cannot be loaded",
            f"Install or update {_driver_phrase(view)} on the Windows host ({_NVIDIA_DOWNLOAD});"
            " WSL2 gets libcuda and libnvidia-ml from it in /usr/lib/wsl/lib. Do not install a"
            " Linux NVIDIA driver inside WSL.",
        )
    if view.container and not [n for n in view.device_nodes if n.startswith("/dev/nvidia")]:
        if visible and visible.lower() not in ("void", "none"):
            title = (
                f"NVIDIA_VISIBLE_DEVICES={visible} is set but this {view.container} container has"
                " no NVIDIA driver library or /dev/nvidia* device: the NVIDIA runtime did not run"
            )
        else:
            title = (
                f"No NVIDIA driver in this {view.container} container: it was started without the"
                " GPU runtime (no driver library, no /dev/nvidia*)"
            )
        need = required_driver(view)
        host = f" The host needs an NVIDIA driver >= {need[0]} ({need[1]})." if need else ""
        return (
            title,
            "Start the container with GPU access: docker run --gpus all ... (the NVIDIA Container"
            " Toolkit must be installed on the host; Kubernetes: request nvidia.com/gpu)."
            f"{host} On a host without an NVIDIA GPU no framework can use one.",
        )
    if view.is_windows:
        return (
            "No NVIDIA driver: nvml.dll cannot be loaded",
            f"Install {_driver_phrase(view)} from {_NVIDIA_DOWNLOAD}.",
        )
    kernel = view.system.get("proc_driver_version")
    if kernel:
        return (
            "The NVIDIA kernel module is loaded but its user-space library libnvidia-ml.so.1 is"
            " missing",
            f"Install the user-space part of the driver that matches the kernel module ({kernel})"
            " so that libnvidia-ml.so.1 and libcuda.so.1 are on the loader path.",
        )
    return (
        "No NVIDIA driver: libnvidia-ml.so.1 cannot be loaded",
        f"Install {_driver_phrase(view)} (Ubuntu: sudo ubuntu-drivers install; otherwise"
        f" {_NVIDIA_DOWNLOAD}) and reboot. On a machine without an NVIDIA GPU no framework can"
        " use one.",
    )


_OTHER_STATUSES = {
    nvml_status.DRIVER_NOT_LOADED: (
        "The NVIDIA driver library is installed but the kernel module is not loaded",
        "Load it with 'sudo modprobe nvidia'; if that fails, 'sudo dmesg | grep -i nvidia' says"
        " why (an unsigned module under Secure Boot is a common cause). Reboot after installing a"
        " driver.",
    ),
    nvml_status.DRIVER_LIBRARY_MISMATCH: (
        "NVIDIA driver/library version mismatch: the driver was updated without a reboot",
        "Reboot (or unload and reload the nvidia kernel modules).",
    ),
    nvml_status.NO_PERMISSION: (
        "No permission to talk to the NVIDIA driver",
        "Give this user access to /dev/nvidia* (add it to the group that owns them: ls -l"
        " /dev/nvidia*); in a container, start it with --gpus.",
    ),
    nvml_status.GPU_LOST: (
        "A GPU has fallen off the bus (NVML: GPU is lost)",
        "Reboot; if it happens again check power and cooling and 'sudo dmesg | grep -i xid'.",
    ),
    nvml_status.FUNCTION_NOT_FOUND: (
        "The NVIDIA driver library is too old for NVML",
        "Upgrade the NVIDIA driver.",
    ),
}


def no_driver(view: View) -> list[Finding]:
    """NO_DRIVER: NVML cannot reach a driver. macOS is left to CPU_ONLY_BUILD (no CUDA there)."""
    status = view.nvml_status
    if view.driver_state != "no_driver" or view.is_macos or status is None:
        return []
    if status == nvml_status.LIBRARY_NOT_FOUND:
        title, fix = _library_not_found(view)
    else:
        title, fix = _OTHER_STATUSES.get(
            status,
            (
                f"NVML cannot initialise: {view.nvml.get('error')}",
                "Run nvidia-smi: it prints the driver's own explanation.",
            ),
        )
    evidence: dict[str, Any] = {
        "nvml_status": status,
        "nvml_error": view.nvml.get("error"),
        "device_nodes": view.device_nodes,
        "container": view.container,
        "wsl": view.is_wsl,
    }
    for name in ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"):
        if view.env(name) is not None:
            evidence[name] = view.env(name)
    return [Finding(codes.NO_DRIVER, Severity.ERROR, title, evidence, fix)]


def no_gpu(view: View) -> list[Finding]:
    """NO_GPU: the driver answers and lists no GPU."""
    if view.driver_state != "no_gpu" or view.is_macos:
        return []
    visible = view.env("NVIDIA_VISIBLE_DEVICES")
    if view.container and visible is not None and visible.lower() == "none":
        fix = (
            "NVIDIA_VISIBLE_DEVICES=none gives this container the driver but no GPU: start it with"
            " --gpus all (or NVIDIA_VISIBLE_DEVICES=all)."
        )
    else:
        fix = (
            "Check that the machine sees the GPU ('lspci | grep -i nvidia'); in a VM, pass the GPU"
            " through to it; after a driver crash ('sudo dmesg | grep -i xid'), reboot."
        )
    evidence = {
        "driver_version": view.driver_version,
        "device_count": view.gpu_count,
        "nvml_status": view.nvml_status,
        "container": view.container,
    }
    title = f"The NVIDIA driver {view.driver_version or ''} is running but reports no GPU"
    return [Finding(codes.NO_GPU, Severity.ERROR, " ".join(title.split()), evidence, fix)]


def mig(view: View) -> list[Finding]:
    """MIG_ENABLED (info) and MIG_NO_INSTANCES (error) for GPUs in MIG mode."""
    findings = []
    for gpu in view.gpus:
        if not gpu.mig_mode:
            continue
        evidence = {"gpu": gpu.index, "gpu_name": gpu.name, "mig_devices": list(gpu.mig_devices)}
        if not gpu.mig_devices:
            findings.append(
                Finding(
                    codes.MIG_NO_INSTANCES,
                    Severity.ERROR,
                    f"{gpu.label} is in MIG mode with no MIG instance: CUDA sees no device on it",
                    evidence,
                    f"Create an instance (sudo nvidia-smi mig -i {gpu.index} -lgip lists the"
                    f" profiles; sudo nvidia-smi mig -i {gpu.index} -cgi <profile> -C creates one),"
                    f" or turn MIG off: sudo nvidia-smi -i {gpu.index} -mig 0.",
                )
            )
            continue
        findings.append(
            Finding(
                codes.MIG_ENABLED,
                Severity.INFO,
                f"{gpu.label} is in MIG mode: frameworks see {len(gpu.mig_devices)} MIG"
                " instance(s), not the whole GPU, and NVML reports no utilization for it",
                evidence,
                "Select an instance with CUDA_VISIBLE_DEVICES=<MIG UUID> (listed in the evidence);"
                " gpuwhy's GPU utilization readings are unavailable in MIG mode.",
            )
        )
    return findings
