"""Target-interpreter probe: JAX's default backend, its devices and the CUDA plugins installed.

JAX reports a missing or failed CUDA backend only through its logger ("CUDA backend failed to
initialize", "An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not
installed", references.md#jax-builds); those records are captured. Prints one JSON document on
stdout.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import traceback
import warnings
from typing import Any


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.lines) < 20:
            self.lines.append(f"{record.levelname}: {record.getMessage()}"[:500])


def _plugins() -> dict[str, str]:
    from importlib import metadata

    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = re.sub(r"[-_.]+", "-", dist.metadata["Name"] or "").lower()
        if re.match(r"^jax-(cuda|rocm)\d*-(plugin|pjrt)$", name) or name == "jax-metal":
            found[name] = dist.version
    return found


def _probe(log: _Collect) -> dict[str, Any]:
    facts: dict[str, Any] = {"imported": False, "plugins": _plugins()}
    logger = logging.getLogger("jax")
    logger.addHandler(log)
    logger.setLevel(logging.INFO)
    try:
        jax = importlib.import_module("jax")
    except BaseException as error:
        facts["import_error"] = f"{type(error).__name__}: {error}"[:1000]
        return facts
    facts["imported"] = True
    facts["version"] = str(jax.__version__)
    try:
        facts["jaxlib_version"] = str(importlib.import_module("jaxlib").__version__)
    except Exception:
        facts["jaxlib_version"] = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            facts["default_backend"] = str(jax.default_backend())
            facts["devices"] = [
                {
                    "platform": str(d.platform),
                    "kind": str(getattr(d, "device_kind", "")),
                    "id": d.id,
                }
                for d in jax.devices()
            ]
        except Exception as error:  # an explicit JAX_PLATFORMS naming a failed backend raises
            facts["backend_error"] = f"{type(error).__name__}: {error}"[:1000]
    facts["warnings"] = [str(w.message)[:500] for w in caught][:20]
    return facts


def main() -> None:
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    log = _Collect()
    try:
        facts = _probe(log)
    except BaseException:
        facts = {"imported": False, "probe_error": traceback.format_exc()[-1000:]}
    facts["log"] = log.lines
    out.write(json.dumps(facts))
    out.flush()


if __name__ == "__main__":
    main()
