"""The probes on this machine: real interpreters, real subprocesses, real (missing) libraries."""

from __future__ import annotations

import ast
import ctypes
import os
import sys
import time
from pathlib import Path

import pytest

from gpuwhy.env import nvml_status
from gpuwhy.env.collect import installed_frameworks
from gpuwhy.env.machine import probe_machine, relevant_environment
from gpuwhy.env.nvml_ctypes import probe_with_ctypes
from gpuwhy.env.nvml_probe import probe_nvml
from gpuwhy.env.runner import PROBES_DIR, InterpreterError, relevant_log_lines, run_probe
from support import framework_env

PYENV = Path(os.path.expanduser("~/.pyenv/versions"))


def _nvml_library_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


def _running(pid: int) -> bool:
    """Whether a process exists and is not a zombie (Linux /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status


def _interpreter_facts(python: Path | str) -> dict[str, object]:
    facts = run_probe(str(python), "python_probe.py", timeout_s=60, environ=os.environ)
    assert facts["probe"] == "ok", facts
    return facts


def test_probe_scripts_parse_as_python_3_8() -> None:
    for script in PROBES_DIR.glob("*.py"):
        ast.parse(script.read_text(), filename=str(script), feature_version=(3, 8))


@pytest.mark.parametrize("version", ["3.8", "3.9"])
def test_probes_run_on_an_old_target_interpreter(version: str) -> None:
    found = sorted(PYENV.glob(f"{version}.*/bin/python"))
    if not found:
        pytest.skip(f"no Python {version} under {PYENV}")
    facts = _interpreter_facts(found[-1])
    assert str(facts["version"]).startswith(version + ".")
    for script in ("tensorflow_probe.py", "torch_probe.py", "jax_probe.py"):
        result = run_probe(str(found[-1]), script, timeout_s=60, environ=os.environ)
        assert result["probe"] == "ok" and result["imported"] is False
        assert "No module named" in str(result["import_error"])


@pytest.mark.slow
def test_interpreter_probe_of_the_framework_environments() -> None:
    conflict = _interpreter_facts(framework_env("tf-conflict"))
    dists = conflict["distributions"]
    assert isinstance(dists, dict)
    assert dists["tensorflow"]["provides"] == ["tensorflow"]
    assert dists["tensorflow-cpu"]["provides"] == ["tensorflow"]
    assert installed_frameworks(dists) == ["tensorflow"]
    torch = _interpreter_facts(framework_env("torch-cpu"))["distributions"]
    assert isinstance(torch, dict) and torch["torch"]["version"].endswith("+cpu")
    assert installed_frameworks(torch) == ["torch"]
    bare = _interpreter_facts(framework_env("bare"))
    assert bare["distributions"] == {} and bare["in_virtualenv"] is True
    libraries = bare["libraries"]
    assert isinstance(libraries, dict)
    assert sorted(libraries) == ["libcublas", "libcuda", "libcudart", "libcudnn", "libnvidia-ml"]


def test_library_loadability_agrees_with_the_loader() -> None:
    libraries = _interpreter_facts(sys.executable)["libraries"]
    assert isinstance(libraries, dict)
    [libcuda] = libraries["libcuda"]
    try:
        ctypes.CDLL("libcuda.so.1")
        expected = True
    except OSError:
        expected = False
    assert libcuda["loadable"] is expected
    if expected:
        assert str(libcuda["path"]).endswith(".so.1") or "libcuda" in str(libcuda["path"])


def test_a_hanging_probe_is_killed_with_its_children_at_the_time_out(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    script = tmp_path / "hang.py"
    script.write_text(
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(marker)!r}, 'w').write(str(child.pid))\n"
        "print('cuInit hanging', file=sys.stderr, flush=True)\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    result = run_probe(sys.executable, script, timeout_s=1.5, environ=os.environ)
    elapsed = time.monotonic() - start
    assert result["probe"] == "timed_out"
    assert result["error"] == "probe timed out after 1.5 s"
    assert result["log"] == ["cuInit hanging"]
    assert 1.5 <= elapsed < 10
    child = int(marker.read_text())
    deadline = time.monotonic() + 5
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(child), "the probe's own child survived the kill"


def test_a_probe_that_prints_no_json_failed(tmp_path: Path) -> None:
    script = tmp_path / "noise.py"
    script.write_text("import sys\nprint('hello')\nprint('Segmentation fault', file=sys.stderr)\n")
    result = run_probe(sys.executable, script, timeout_s=30, environ=os.environ)
    assert result["probe"] == "failed" and result["error"] == "Segmentation fault"


def test_an_interpreter_that_cannot_start(tmp_path: Path) -> None:
    with pytest.raises(InterpreterError):
        run_probe(str(tmp_path / "nothing"), "python_probe.py", timeout_s=5, environ=os.environ)


def test_log_lines_keep_cuda_trouble_without_prefixes_or_noise() -> None:
    stderr = (
        "I0000 00:00:1795382735.387980    8349 port.cc:153] oneDNN custom operations are on.\n"
        "I0000 00:00:1795382735.388476    8349 cudart_stub.cc:31] Could not find cuda drivers on"
        " your machine, GPU will not be used.\n"
        "I0000 00:00:1795382735.388476    8349 cudart_stub.cc:31] Could not find cuda drivers on"
        " your machine, GPU will not be used.\n"
        "2024-09-24 09:32:51.314966: W tensorflow/core/common_runtime/gpu/gpu_device.cc:2344]"
        " Cannot dlopen some GPU libraries.\n"
        "Epoch 1/3\n"
    )
    assert relevant_log_lines(stderr) == [
        "cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.",
        "tensorflow/core/common_runtime/gpu/gpu_device.cc:2344] Cannot dlopen some GPU libraries.",
    ]


def test_machine_probe_reads_the_tree(tmp_path: Path) -> None:
    for name in ("dev/nvidia0", "dev/nvidiactl", "dev/dxg", ".dockerenv"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    version = tmp_path / "proc" / "driver" / "nvidia" / "version"
    version.parent.mkdir(parents=True)
    version.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06\nGCC version\n")
    facts = probe_machine({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, root=str(tmp_path))
    assert facts["device_nodes"] == ["/dev/nvidia0", "/dev/nvidiactl", "/dev/dxg"]
    assert facts["wsl"] is True
    assert facts["container"] == "docker"
    assert facts["container_hints"] == ["/.dockerenv", "KUBERNETES_SERVICE_HOST"]
    assert facts["proc_driver_version"] == (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06"
    )
    empty = probe_machine({}, root=str(tmp_path / "nothing"))
    assert (empty["device_nodes"], empty["wsl"], empty["container"]) == ([], False, None)


def test_only_relevant_variables_are_recorded() -> None:
    environ = {"CUDA_VISIBLE_DEVICES": "", "HOME": "/root", "TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    assert relevant_environment(environ) == {
        "CUDA_VISIBLE_DEVICES": "",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }


@pytest.mark.skipif(_nvml_library_present(), reason="an NVIDIA driver library is present here")
def test_nvml_without_a_driver_library_both_ways() -> None:
    facts = probe_nvml()
    assert facts["status"] == nvml_status.LIBRARY_NOT_FOUND
    assert facts["error_code"] == 12 and facts["binding"] == "pynvml"
    fallback = probe_with_ctypes()
    assert fallback["status"] == nvml_status.LIBRARY_NOT_FOUND
    assert fallback["binding"] == "ctypes"


@pytest.mark.gpu
def test_nvml_on_a_gpu_machine() -> None:
    facts = probe_nvml()
    assert facts["status"] == nvml_status.OK
    assert facts["device_count"] >= 1 and facts["driver_version"]
    for device in facts["devices"]:
        assert len(device["compute_capability"]) == 2 and device["uuid"].startswith("GPU-")
    assert probe_with_ctypes()["device_count"] == facts["device_count"]


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (0, "ok"),
        (9, "driver_not_loaded"),
        (12, "library_not_found"),
        (18, "driver_library_mismatch"),
        (28, "no_gpu"),
        (4, "no_permission"),
        (999, "error"),
    ],
)
def test_nvml_return_codes(code: int, status: str) -> None:
    assert nvml_status.classify(code) == status
