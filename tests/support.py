"""Helpers shared by the tests (importable as `support`: pyproject puts tests/ on the path)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"


def framework_env(name: str) -> Path:
    """The interpreter of a real test environment made by scripts/test-envs.sh.

    Skips where the environments were not made (a quick local run); in CI a missing one fails,
    so a broken setup can never pass as skipped tests.
    """
    root = os.environ.get("GPUWHY_TEST_ENVS")
    python = Path(root, name, "bin", "python") if root else None
    if python is not None and python.exists() and Path(root, name, ".done").exists():  # type: ignore[arg-type]
        return python
    message = f"test environment {name!r} missing: run scripts/test-envs.sh"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
