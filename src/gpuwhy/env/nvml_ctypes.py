"""Fallback when the `pynvml` module is missing: load libnvidia-ml with ctypes only to classify.

Calls four C functions that exist in every driver since CUDA 11 (nvml.h): nvmlInit_v2,
nvmlSystemGetDriverVersion, nvmlDeviceGetCount_v2, nvmlShutdown. No per-GPU facts.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

from gpuwhy.env import nvml_status

_DRIVER_VERSION_BUFFER = 80  # NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE (nvml.h)


def _load() -> ctypes.CDLL:
    if sys.platform == "win32":  # same search as the official binding (references.md#nvml-binding)
        import os

        windir = os.environ.get("WINDIR", "C:\\Windows")
        program_files = os.environ.get("PROGRAMFILES", "C:\\Program Files")
        for path in (
            os.path.join(windir, "System32", "nvml.dll"),
            os.path.join(program_files, "NVIDIA Corporation", "NVSMI", "nvml.dll"),
        ):
            try:
                return ctypes.CDLL(path)
            except OSError:
                continue
        raise OSError("nvml.dll not found")
    return ctypes.CDLL("libnvidia-ml.so.1")


def probe_with_ctypes() -> dict[str, Any]:
    """Classify NVML's initialisation without the Python bindings. Never raises."""
    facts: dict[str, Any] = {"binding": "ctypes", "error": None, "error_code": None}
    try:
        lib = _load()
    except OSError as error:
        facts.update(status=nvml_status.LIBRARY_NOT_FOUND, error=str(error), error_code=12)
        return facts
    try:
        code = int(lib.nvmlInit_v2())
    except AttributeError as error:  # a library without the symbol is not a usable NVML
        facts.update(status=nvml_status.FUNCTION_NOT_FOUND, error=str(error), error_code=13)
        return facts
    facts["status"] = nvml_status.classify(code)
    if code != 0:
        facts.update(error=f"nvmlInit_v2 returned {code}", error_code=code)
        return facts
    try:
        buffer = ctypes.create_string_buffer(_DRIVER_VERSION_BUFFER)
        if lib.nvmlSystemGetDriverVersion(buffer, _DRIVER_VERSION_BUFFER) == 0:
            facts["driver_version"] = buffer.value.decode("utf-8", "replace")
        count = ctypes.c_uint(0)
        if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0:
            facts["device_count"] = int(count.value)
            if count.value == 0:
                facts["status"] = nvml_status.NO_GPU
        facts["devices"] = []
    finally:
        lib.nvmlShutdown()
    return facts
