"""Target-interpreter probe: TensorFlow's build and the GPUs it finds.

Runs in its own process because TensorFlow's initialisation is one-way and can hang on a broken
driver; the caller kills it at its time-out. Only ``list_physical_devices`` is called: it does not
create the runtime context (references.md#tf-devices-memory). The errors TensorFlow logs while
looking (cuInit, dlopen) go to stderr, which the caller reads. Prints one JSON document on stdout.
"""

from __future__ import annotations

import importlib
import json
import os
import traceback
from typing import Any


def _probe() -> dict[str, Any]:
    facts: dict[str, Any] = {"imported": False}
    try:
        tf = importlib.import_module("tensorflow")
    except BaseException as error:  # ImportError, or a missing .so raising OSError
        facts["import_error"] = f"{type(error).__name__}: {error}"[:1000]
        return facts
    facts["imported"] = True
    facts["version"] = str(getattr(tf, "__version__", ""))
    facts["module_path"] = os.path.dirname(str(getattr(tf, "__file__", "")))
    try:
        info = dict(tf.sysconfig.get_build_info())
        facts["build_info"] = {k: v for k, v in info.items() if isinstance(v, (str, bool, list))}
    except Exception as error:
        facts["build_info_error"] = f"{type(error).__name__}: {error}"[:500]
    try:
        gpus = tf.config.list_physical_devices("GPU")
        facts["gpus"] = [str(d.name) for d in gpus]
        details = []
        for device in gpus:
            try:
                detail = tf.config.experimental.get_device_details(device)
                capability = detail.get("compute_capability")
                details.append(
                    {
                        "name": detail.get("device_name"),
                        "compute_capability": list(capability) if capability else None,
                    }
                )
            except Exception:
                details.append({"name": None, "compute_capability": None})
        facts["gpu_details"] = details
    except Exception as error:
        facts["list_devices_error"] = f"{type(error).__name__}: {error}"[:500]
    return facts


def main() -> None:
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # TensorFlow prints placement logs on stdout; keep stdout for our JSON only
    try:
        facts = _probe()
    except BaseException:
        facts = {"imported": False, "probe_error": traceback.format_exc()[-1000:]}
    out.write(json.dumps(facts))
    out.flush()


if __name__ == "__main__":
    main()
