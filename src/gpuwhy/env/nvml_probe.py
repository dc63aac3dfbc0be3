"""NVML probe (in gpuwhy's own process): initialisation result, driver, and each GPU's facts.

Uses the official bindings (`nvidia-ml-py`, module `pynvml`) when importable; otherwise loads
libnvidia-ml with ctypes only to classify the initialisation (nvml_ctypes). A value NVML cannot
give is recorded as null: one unsupported query never loses the others.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from gpuwhy import nvml_codes
from gpuwhy.env import nvml_status
from gpuwhy.env.nvml_ctypes import probe_with_ctypes


def _get(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception:  # NVMLError_NotSupported and friends: the value is simply unknown
        return None


def _mig(nvml: Any, handle: Any) -> dict[str, Any]:
    modes = _get(lambda: nvml.nvmlDeviceGetMigMode(handle))
    if not modes:
        return {"mig_mode": None}
    enabled = modes[0] == 1
    facts: dict[str, Any] = {"mig_mode": enabled}
    if enabled:
        uuids = []
        for index in range(_get(lambda: nvml.nvmlDeviceGetMaxMigDeviceCount(handle)) or 0):
            mig = _get(partial(nvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, index))
            if mig is not None:
                uuids.append(nvml_status.decode(_get(partial(nvml.nvmlDeviceGetUUID, mig))))
        facts["mig_devices"] = uuids
    return facts


def _device(nvml: Any, index: int) -> dict[str, Any]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    name = _get(lambda: nvml.nvmlDeviceGetName(handle))
    uuid = _get(lambda: nvml.nvmlDeviceGetUUID(handle))
    pci = _get(lambda: nvml.nvmlDeviceGetPciInfo(handle))
    capability = _get(lambda: nvml.nvmlDeviceGetCudaComputeCapability(handle))
    memory = _get(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
    facts: dict[str, Any] = {
        "index": index,
        "name": nvml_status.decode(name) if name is not None else None,
        "uuid": nvml_status.decode(uuid) if uuid is not None else None,
        "pci_bus_id": nvml_status.decode(pci.busId) if pci is not None else None,
        "compute_capability": list(capability) if capability else None,
        "memory_total_bytes": int(memory.total) if memory is not None else None,
    }
    facts.update(_mig(nvml, handle))
    return facts


def _initialised(nvml: Any, status: str) -> dict[str, Any]:
    """Facts once nvmlInit succeeded (possibly with NVML_INIT_FLAG_NO_GPUS)."""
    driver = _get(nvml.nvmlSystemGetDriverVersion)
    facts: dict[str, Any] = {
        "status": status,
        "driver_version": nvml_status.decode(driver) if driver is not None else None,
        # The highest CUDA the driver supports, e.g. 12080 = 12.8 (references.md#nvml-versions).
        "cuda_driver_version": _get(nvml.nvmlSystemGetCudaDriverVersion),
    }
    # _v2 asks libcuda itself and fails when it is missing (references.md#nvml-versions).
    v2 = getattr(nvml, "nvmlSystemGetCudaDriverVersion_v2", None)
    if v2 is not None:
        try:
            v2()
            facts["libcuda_found"] = True
        except Exception as error:
            facts["libcuda_found"] = False if getattr(error, "value", None) == 12 else None
    count = _get(nvml.nvmlDeviceGetCount) or 0
    facts["device_count"] = count
    facts["devices"] = [_device(nvml, i) for i in range(count)]
    if status == nvml_status.OK and count == 0:
        facts["status"] = nvml_status.NO_GPU
    return facts


def probe_nvml() -> dict[str, Any]:
    """Classify NVML's initialisation and read the driver and GPUs. Never raises."""
    try:
        import pynvml as nvml  # lazy: gpuwhy imports without the bindings
    except ImportError:
        return probe_with_ctypes()
    base: dict[str, Any] = {"binding": "pynvml", "error": None, "error_code": None}
    try:
        nvml.nvmlInit()
    except Exception as error:
        code = getattr(error, "value", None)
        base.update(status=nvml_status.classify(code), error=str(error), error_code=code)
        # GpuNotFound: confirm the driver answers with no GPU (references.md#nvml-init)
        if code == nvml_codes.GPU_NOT_FOUND:
            try:
                nvml.nvmlInitWithFlags(nvml.NVML_INIT_FLAG_NO_GPUS)
            except Exception:
                return base
            try:
                base.update(_initialised(nvml, nvml_status.NO_GPU))
            finally:
                _get(nvml.nvmlShutdown)
        return base
    try:
        base.update(_initialised(nvml, nvml_status.OK))
    except Exception as error:  # a GPU that vanished between calls: keep what we know
        base.update(status=nvml_status.ERROR, error=f"{type(error).__name__}: {error}")
    finally:
        _get(nvml.nvmlShutdown)
    return base
