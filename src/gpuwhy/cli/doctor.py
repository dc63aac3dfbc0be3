"""`gpuwhy doctor` (not yet built)."""

from __future__ import annotations

import argparse
from typing import Any

from gpuwhy.errors import UsageError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("doctor", help="(not yet available)")
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    raise UsageError("'gpuwhy doctor' is not available in this version")
