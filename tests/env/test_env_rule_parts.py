"""The reasoning inside the rules, piece by piece, against the documented behaviour it encodes."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwhy.env.rules.arch import support
from gpuwhy.env.rules.libraries import missing_library_names
from gpuwhy.env.rules.view import Gpu, View
from gpuwhy.env.rules.visibility import visible_entries

TWO_GPUS = [
    Gpu(0, "A", "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", (8, 0), False),
    Gpu(
        1,
        "B",
        "GPU-1f3e0c2a-6a51-4b36-9d7e-2f0e8b1c9a11",
        (8, 0),
        True,
        ("MIG-3b0f2c55-8f0e-5a7e-9c1d-4e2b7a6f1d20",),
    ),
]
OLD_MIG = "MIG-GPU-1f3e0c2a-6a51-4b36-9d7e-2f0e8b1c9a11/1/0"


@pytest.mark.parametrize(
    ("value", "accepted", "stopper"),
    [
        ("", [], ""),  # empty: no device is visible
        ("-1", [], "-1"),
        ("0,2,-1,1", ["0"], "2"),  # 2 does not exist here; the list stops at it
        ("1,0", ["1", "0"], None),
        ("GPU-8932f937", ["GPU-8932f937"], None),  # an unambiguous UUID prefix
        ("GPU-", [], "GPU-"),  # ambiguous: matches both
        ("MIG-3b0f2c55", ["MIG-3b0f2c55"], None),
        (OLD_MIG, [OLD_MIG], None),  # the older MIG-<GPU UUID>/<GI>/<CI> form
        ("NoDevFiles", [], "NoDevFiles"),
    ],
)
def test_cuda_visible_devices_as_cuda_reads_it(
    value: str, accepted: list[str], stopper: str | None
) -> None:
    assert visible_entries(value, TWO_GPUS) == (accepted, stopper)


def test_cuda_visible_devices_without_a_driver_judges_only_the_syntax() -> None:
    assert visible_entries("0,2,-1,1", None) == (["0", "2"], "-1")
    assert visible_entries("3", None) == (["3"], None)


@pytest.mark.parametrize(
    ("capability", "archs", "expected"),
    [
        ((8, 6), ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"], "native"),  # sm_80 runs on 8.6
        ((8, 9), ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"], "native"),
        ((9, 0), ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"], "ptx"),
        ((12, 0), ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"], "ptx"),  # PTX JITs forward
        ((3, 7), ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"], "none"),
        ((7, 5), ["sm_80", "sm_90"], "none"),  # SASS never runs on an older major
        ((10, 0), ["sm_90a", "sm_100a"], "native"),
        ((10, 3), ["sm_100a"], "none"),  # arch-specific code runs on that exact GPU only
        ((12, 0), ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], "native"),
    ],
)
def test_binary_compatibility(capability: tuple[int, int], archs: list[str], expected: str) -> None:
    assert support(capability, archs) == expected


def test_library_names_from_errors_and_logs() -> None:
    text = (
        "OSError: libcudnn.so.9: cannot open shared object file\n"
        "Could not load dynamic library 'libcublasLt.so.12'; dlerror: not found\n"
        "Could not load dynamic library 'libcudnn.so.9'\n"
        "FileNotFoundError: Could not find module 'cudnn64_9.dll'"
    )
    assert missing_library_names(text) == ["libcudnn.so.9", "libcublasLt.so.12", "cudnn64_9.dll"]
    assert missing_library_names("No module named 'tensorflow'") == []


def _view(**sections: Any) -> View:
    return View({"system": {}, "python": {}, **sections})


def test_pip_commands_target_the_interpreter_and_quote_it() -> None:
    assert _view(python={"executable": "/opt/my env/bin/python"}).pip("install x") == (
        "'/opt/my env/bin/python' -m pip install x"
    )
    windows = _view(python={"executable": "C:\\Program Files\\Py\\python.exe", "platform": "win32"})
    assert windows.pip("install x") == '"C:\\Program Files\\Py\\python.exe" -m pip install x'


def test_platform_and_driver_table_column() -> None:
    assert _view(python={"platform": "linux"}).os_key == "linux"
    assert _view(python={"platform": "linux"}, system={"wsl": True}).os_key == "windows"
    assert _view(system={"os": "Darwin"}).is_macos


@pytest.mark.parametrize(
    ("nvml", "state"),
    [
        ({"status": "ok", "device_count": 2}, "ok"),
        ({"status": "ok", "device_count": 0}, "no_gpu"),
        ({"status": "no_gpu"}, "no_gpu"),
        ({"status": "library_not_found"}, "no_driver"),
        ({"status": "driver_library_mismatch"}, "no_driver"),
        ({"status": "timed_out"}, "unknown"),
        ({}, "unknown"),
    ],
)
def test_driver_state(nvml: dict[str, Any], state: str) -> None:
    assert _view(nvml=nvml).driver_state == state
