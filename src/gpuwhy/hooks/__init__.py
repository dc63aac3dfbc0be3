"""gpuwhy.hooks: framework integrations that emit phase, step and input-wait spans.

Importing this package imports no framework; `install()` patches frameworks only when (and
after) the job imports them. See docs/hooks.md for what is emitted per framework.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["install", "uninstall"]


def install(environ: Mapping[str, str] = os.environ) -> None:
    """Auto-instrument Keras, tf.data, PyTorch and Lightning as the job imports them."""
    from gpuwhy.hooks import auto

    auto.install(environ)


def uninstall() -> None:
    """Undo `install()`: remove the import watcher and every patch."""
    from gpuwhy.hooks import auto

    auto.uninstall()
