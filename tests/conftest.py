"""Shared fixtures: the real framework environments and the `gpu` marker."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"


def _gpu_reason() -> str | None:
    """Why GPU tests cannot run here, or None if an NVIDIA GPU answers."""
    if shutil.which("nvidia-smi") is None:
        return "no NVIDIA driver on this machine (nvidia-smi not found)"
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"nvidia-smi failed: {error}"
    if out.returncode != 0 or "GPU" not in out.stdout:
        return "nvidia-smi lists no GPU"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = None
    if any(item.get_closest_marker("gpu") for item in items):
        reason = _gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {reason}")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


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
