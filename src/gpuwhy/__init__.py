"""gpuwhy: is your training job really using the GPU, how well, phase by phase, and why not.

`import gpuwhy` is cheap and imports no framework; the hook API is loaded on first use.
"""

from __future__ import annotations

from typing import Any

from gpuwhy._version import __version__
from gpuwhy.model import Finding, Severity

__all__ = ["Finding", "Severity", "__version__"]


def __getattr__(name: str) -> Any:
    raise AttributeError(f"module 'gpuwhy' has no attribute {name!r}")
