"""NVML return codes (nvml.h `nvmlReturn_t`; nvidia-ml-py's NVML_ERROR_*), the one table that
the environment checks (env/) and the live sampler (telemetry/) both classify.
See docs/references.md#nvml-return-codes."""

from __future__ import annotations

SUCCESS = 0
INVALID_ARGUMENT = 2
NOT_SUPPORTED = 3
NO_PERMISSION = 4
NOT_FOUND = 6
DRIVER_NOT_LOADED = 9
LIBRARY_NOT_FOUND = 12
FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15
LIB_RM_VERSION_MISMATCH = 18
NO_DATA = 21
ARGUMENT_VERSION_MISMATCH = 25
NOT_READY = 27
GPU_NOT_FOUND = 28
