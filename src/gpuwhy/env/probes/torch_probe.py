"""Target-interpreter probe: PyTorch's CUDA build, cuDNN, the devices and arch list it has.

``torch.cuda.is_available()`` calls cuInit, which can hang on a broken driver: this runs in its own
process, killed by the caller at its time-out. Warnings torch raises while looking (driver too old,
GPU arch not compiled in) are recorded. Prints one JSON document on stdout.
"""

from __future__ import annotations

import importlib
import json
import os
import traceback
import warnings
from typing import Any


def _devices(torch: Any, count: int) -> list[dict[str, Any]]:
    devices = []
    for index in range(count):
        try:
            major, minor = torch.cuda.get_device_capability(index)
            name = str(torch.cuda.get_device_name(index))
            devices.append({"name": name, "compute_capability": [major, minor]})
        except Exception as error:
            devices.append({"error": f"{type(error).__name__}: {error}"[:300]})
    return devices


def _probe() -> dict[str, Any]:
    facts: dict[str, Any] = {"imported": False}
    try:
        torch = importlib.import_module("torch")
    except BaseException as error:  # ImportError, or a CUDA library that cannot be loaded
        facts["import_error"] = f"{type(error).__name__}: {error}"[:1000]
        return facts
    facts["imported"] = True
    facts["version"] = str(torch.__version__)
    facts["cuda"] = getattr(torch.version, "cuda", None)
    facts["hip"] = getattr(torch.version, "hip", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            facts["cudnn_version"] = torch.backends.cudnn.version()
        # a cuDNN major-version mismatch raises here (references.md#torch-builds)
        except Exception as error:
            facts["cudnn_error"] = f"{type(error).__name__}: {error}"[:500]
        # get_arch_list() answers [] while CUDA is unavailable; the compiled-in flags do not.
        flags = getattr(torch._C, "_cuda_getArchFlags", None)
        arch = flags() if callable(flags) else None
        facts["arch_list"] = str(arch).split() if arch else []
        available = bool(torch.cuda.is_available())
        facts["cuda_available"] = available
        count = int(torch.cuda.device_count()) if available else 0
        facts["device_count"] = count
        facts["devices"] = _devices(torch, count)
        mps = getattr(torch.backends, "mps", None)
        facts["mps_available"] = bool(mps.is_available()) if mps is not None else False
    facts["warnings"] = [str(w.message)[:500] for w in caught][:20]
    return facts


def main() -> None:
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        facts = _probe()
    except BaseException:
        facts = {"imported": False, "probe_error": traceback.format_exc()[-1000:]}
    out.write(json.dumps(facts))
    out.flush()


if __name__ == "__main__":
    main()
