"""Reversible attribute patches: applied once, undone exactly (tests restore the frameworks)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

_MISSING = object()
_applied: dict[tuple[int, str], tuple[Any, str, Any]] = {}  # (id(owner), name) -> restore info
_undo: list[Callable[[], None]] = []


def patch(owner: Any, name: str, make: Callable[[Any], Any]) -> bool:
    """Replace `owner.name` by `make(original)` unless already patched; True if it applied.

    `original` is the attribute as seen through `owner` (inherited ones included); restoring
    deletes an attribute that was only inherited, so the class is left as it was found.
    """
    key = (id(owner), name)
    if key in _applied:
        return False
    original = getattr(owner, name, None)
    own = vars(owner).get(name, _MISSING)
    replacement = make(original)
    setattr(owner, name, replacement)
    _applied[key] = (owner, name, own)
    return True


def is_patched(owner: Any, name: str) -> bool:
    return (id(owner), name) in _applied


def on_undo(undo: Callable[[], None]) -> None:
    """Register an extra undo action (a removable hook handle, say)."""
    _undo.append(undo)


def undo_all() -> None:
    """Restore everything patched, newest first."""
    for owner, name, own in reversed(list(_applied.values())):
        if own is _MISSING:
            with contextlib.suppress(AttributeError):
                delattr(owner, name)
        else:
            setattr(owner, name, own)
    _applied.clear()
    while _undo:
        with contextlib.suppress(Exception):
            _undo.pop()()
