"""How an NVML initialisation result is classified (references.md#nvml-init, nvml.h return
codes)."""

from __future__ import annotations

from gpuwhy import nvml_codes

OK = "ok"
LIBRARY_NOT_FOUND = "library_not_found"  # no libnvidia-ml: no user-space driver, or no runtime
DRIVER_NOT_LOADED = "driver_not_loaded"  # library present, kernel module not running
NO_PERMISSION = "no_permission"
DRIVER_LIBRARY_MISMATCH = "driver_library_mismatch"  # upgraded driver, not rebooted
NO_GPU = "no_gpu"  # driver fine, no device
GPU_LOST = "gpu_lost"
FUNCTION_NOT_FOUND = "function_not_found"  # a library too old for the binding
ERROR = "error"  # any other NVML error
TIMED_OUT = "timed_out"

_BY_CODE = {
    nvml_codes.NO_PERMISSION: NO_PERMISSION,
    nvml_codes.DRIVER_NOT_LOADED: DRIVER_NOT_LOADED,
    nvml_codes.LIBRARY_NOT_FOUND: LIBRARY_NOT_FOUND,
    nvml_codes.FUNCTION_NOT_FOUND: FUNCTION_NOT_FOUND,
    nvml_codes.GPU_IS_LOST: GPU_LOST,
    nvml_codes.LIB_RM_VERSION_MISMATCH: DRIVER_LIBRARY_MISMATCH,
    nvml_codes.GPU_NOT_FOUND: NO_GPU,
}


def classify(code: int | None) -> str:
    """The status for an NVML return code (0 = success)."""
    if code == nvml_codes.SUCCESS:
        return OK
    return _BY_CODE.get(code if code is not None else -1, ERROR)


def decode(value: object) -> str:
    """NVML strings arrive as bytes from older bindings and as str from newer ones."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
