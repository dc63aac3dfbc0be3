"""gpuwhy: is your training job really using the GPU, how well, phase by phase, and why not.

`import gpuwhy` is cheap (well under a millisecond) and imports no framework; the hook API,
`monitor` and the finding types are loaded on first use.
"""

from __future__ import annotations

import importlib

from gpuwhy._version import __version__

TYPE_CHECKING = False  # typing's own costs milliseconds to import (mypy reads it as typing's)

if TYPE_CHECKING:
    from gpuwhy.model import Finding, Severity
    from gpuwhy.runtime.monitor import monitor

__all__ = [
    "Finding",
    "KerasCallback",
    "LightningCallback",
    "Severity",
    "__version__",
    "iterate",
    "monitor",
    "phase",
    "step",
    "wait",
]

_HOOKS_API = "gpuwhy.hooks.api"
# Public names that live in heavier modules: name -> (module, attribute), imported on first use.
_LAZY = {
    "Finding": ("gpuwhy.model", "Finding"),
    "Severity": ("gpuwhy.model", "Severity"),
    "monitor": ("gpuwhy.runtime.monitor", "monitor"),
    "phase": (_HOOKS_API, "phase"),
    "step": (_HOOKS_API, "step"),
    "wait": (_HOOKS_API, "wait"),
    "iterate": (_HOOKS_API, "iterate"),
    "KerasCallback": (_HOOKS_API, "KerasCallback"),
    "LightningCallback": (_HOOKS_API, "LightningCallback"),
}
# Callback classes derive from the framework's own base class, so they are made on first use by
# a factory that imports the framework (only then).
_FACTORIES = {
    "KerasCallback": "keras_callback_class",
    "LightningCallback": "lightning_callback_class",
}


def __getattr__(name: str) -> object:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'gpuwhy' has no attribute {name!r}")
    module_name, attribute = target
    try:
        module = importlib.import_module(module_name)
        if hasattr(module, attribute) or name not in _FACTORIES:
            value = getattr(module, attribute)
        else:
            value = getattr(module, _FACTORIES[name])()
    except (ImportError, AttributeError) as error:
        raise AttributeError(f"gpuwhy.{name} is not available: {error}") from error
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
