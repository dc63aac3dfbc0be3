"""`gpuwhy doctor --python ENV --json` on the real framework environments of this machine.

Each environment gets the exact findings its content and this machine (no NVIDIA driver) call for.
Slow: every run imports its frameworks in subprocesses (TensorFlow alone takes seconds).
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from gpuwhy.env.machine import RELEVANT_VARIABLES, probe_machine
from support import framework_env

SRC = Path(__file__).resolve().parents[2] / "src"


def _driver_library_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        _driver_library_present(), reason="these expectations are for a machine without a driver"
    ),
]


def doctor(python: Path | str, tmp_path: Path, **env: str) -> tuple[int, dict[str, Any]]:
    # Only the variables a test names may reach the doctor: it reports every relevant one.
    environ = {k: v for k, v in os.environ.items() if k not in RELEVANT_VARIABLES}
    environ.update(env, PYTHONPATH=str(SRC))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuwhy",
            "doctor",
            "--python",
            str(python),
            "--json",
            "--timeout",
            "300",
        ],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.stderr == "", done.stderr
    return done.returncode, json.loads(done.stdout)


def codes(report: Mapping[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(f["code"], f["severity"], f["evidence"].get("framework")) for f in report["findings"]]


def finding(report: Mapping[str, Any], code: str) -> dict[str, Any]:
    [found] = [f for f in report["findings"] if f["code"] == code]
    return dict(found)


def _check_no_driver(report: Mapping[str, Any]) -> None:
    no_driver = finding(report, "NO_DRIVER")
    assert no_driver["evidence"]["nvml_status"] == "library_not_found"
    assert no_driver["evidence"]["container"] == probe_machine()["container"]
    assert report["facts"]["nvml"]["status"] == "library_not_found"


def _main_python() -> str:
    if not all(importlib.util.find_spec(m) for m in ("tensorflow", "torch", "jax")):
        pytest.skip("the main environment (TensorFlow, PyTorch and JAX) is not the one running")
    return sys.executable


def test_main_environment_tensorflow_cuda_build_torch_and_jax_cpu(tmp_path: Path) -> None:
    status, report = doctor(_main_python(), tmp_path)
    assert status == 1
    assert codes(report) == [
        ("CPU_ONLY_BUILD", "error", "torch"),
        ("CPU_ONLY_BUILD", "error", "jax"),
        ("NO_DRIVER", "error", None),
    ]
    _check_no_driver(report)
    tf = report["facts"]["frameworks"]["tensorflow"]
    # The plain tensorflow wheel is a CUDA build: no CPU_ONLY_BUILD for it, and its own log says
    # why it found no GPU.
    assert tf["build_info"]["is_cuda_build"] is True
    assert tf["build_info"]["cuda_version"] == "12.5.1"
    assert tf["gpus"] == []
    assert any("cuInit" in line or "cuda drivers" in line for line in tf["log"])
    torch = next(f for f in report["findings"] if f["evidence"].get("framework") == "torch")
    assert torch["evidence"]["torch_version_cuda"] is None
    assert report["verdicts"][0].startswith(
        "TensorFlow 2.21.0: will run on CPU only — no NVIDIA driver"
    )


def test_tensorflow_cpu_environment(tmp_path: Path) -> None:
    python = framework_env("tf-cpu")
    status, report = doctor(python, tmp_path)
    assert status == 1
    assert codes(report) == [
        ("CPU_ONLY_BUILD", "error", "tensorflow"),
        ("NO_DRIVER", "error", None),
    ]
    _check_no_driver(report)
    cpu = finding(report, "CPU_ONLY_BUILD")
    assert cpu["evidence"]["is_cuda_build"] is False
    assert cpu["evidence"]["distributions"] == {"tensorflow-cpu": "2.21.0"}
    assert cpu["fix"] == (
        f"{python} -m pip uninstall -y tensorflow-cpu && {python} -m pip install"
        ' "tensorflow[and-cuda]==2.21.0"'
    )


def test_torch_cpu_environment(tmp_path: Path) -> None:
    python = framework_env("torch-cpu")
    status, report = doctor(python, tmp_path)
    assert status == 1
    assert codes(report) == [("CPU_ONLY_BUILD", "error", "torch"), ("NO_DRIVER", "error", None)]
    _check_no_driver(report)
    cpu = finding(report, "CPU_ONLY_BUILD")
    assert cpu["evidence"]["version"] == "2.13.0+cpu"
    assert cpu["evidence"]["torch_version_cuda"] is None
    assert f'{python} -m pip install --force-reinstall "torch==2.13.0"' in cpu["fix"]


def test_tensorflow_and_tensorflow_cpu_together(tmp_path: Path) -> None:
    python = framework_env("tf-conflict")
    status, report = doctor(python, tmp_path)
    assert status == 1
    # tensorflow was installed last: its CUDA build is what imports, so the conflict is a warning.
    assert codes(report) == [
        ("NO_DRIVER", "error", None),
        ("CONFLICTING_PACKAGES", "warning", "tensorflow"),
    ]
    conflict = finding(report, "CONFLICTING_PACKAGES")
    assert conflict["evidence"]["distributions"] == {
        "tensorflow": "2.21.0",
        "tensorflow-cpu": "2.21.0",
    }
    assert conflict["evidence"]["importable_build_is_gpu"] is True
    assert report["facts"]["frameworks"]["tensorflow"]["build_info"]["is_cuda_build"] is True
    assert f"{python} -m pip uninstall -y tensorflow tensorflow-cpu && " in conflict["fix"]


def test_bare_environment(tmp_path: Path) -> None:
    python = framework_env("bare")
    status, report = doctor(python, tmp_path)
    assert status == 1
    assert codes(report) == [("NO_DRIVER", "error", None)]
    assert report["facts"]["frameworks"] == {}
    assert report["verdicts"] == [f"No TensorFlow, PyTorch or JAX installed in {python}"]


def test_cuda_visible_devices_minus_one(tmp_path: Path) -> None:
    status, report = doctor(_main_python(), tmp_path, CUDA_VISIBLE_DEVICES="-1")
    assert status == 1
    assert codes(report) == [
        ("CPU_ONLY_BUILD", "error", "torch"),
        ("CPU_ONLY_BUILD", "error", "jax"),
        ("GPUS_HIDDEN", "error", None),
        ("NO_DRIVER", "error", None),
    ]
    hidden = finding(report, "GPUS_HIDDEN")
    assert hidden["evidence"] == {
        "CUDA_VISIBLE_DEVICES": "-1",
        "first_invalid_entry": "-1",
        "gpus_on_machine": None,
    }
    assert hidden["fix"].startswith("unset CUDA_VISIBLE_DEVICES")
    assert report["facts"]["environment"] == {"CUDA_VISIBLE_DEVICES": "-1"}
    assert "CUDA_VISIBLE_DEVICES='-1' hides every GPU" in report["verdicts"][0]
