"""The pure rules on facts files (tests/data/facts, see PROVENANCE.md): exact findings per file."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpuwhy.env import evaluate, validate_facts, verdicts
from gpuwhy.model import Finding

FACTS = Path(__file__).resolve().parents[1] / "data" / "facts"


def load(name: str) -> dict[str, Any]:
    return validate_facts(json.loads((FACTS / name).read_text()), name)


def summary(findings: list[Finding]) -> list[tuple[str, str, str | None]]:
    """(code, severity, framework) of each finding, in report order."""
    return [(f.code, f.severity.value, f.evidence.get("framework")) for f in findings]


def by_code(findings: list[Finding], code: str) -> list[Finding]:
    return [f for f in findings if f.code == code]


# What each file must produce, reasoned from the file's situation (see its "constructed" text).
EXPECTED: dict[str, list[tuple[str, str, str | None]]] = {
    "constructed-linux-a100-healthy.json": [("TF_MEMORY_GROWTH", "info", "tensorflow")],
    "constructed-linux-old-driver.json": [
        ("DRIVER_TOO_OLD", "error", "torch"),  # CUDA 13.2 build on a CUDA 12.2 driver
        ("DRIVER_TOO_OLD", "warning", "tensorflow"),  # 12.5.1 on 12.2: minor-version compat
        ("TF_MEMORY_GROWTH", "info", "tensorflow"),
    ],
    "constructed-linux-h100-mig.json": [
        ("MIG_NO_INSTANCES", "error", None),
        ("UNSUPPORTED_ARCH", "warning", "tensorflow"),  # sm_90 only as PTX (compute_90)
        ("UNSUPPORTED_ARCH", "warning", "tensorflow"),
        ("MIG_ENABLED", "info", None),
        ("TF_MEMORY_GROWTH", "info", "tensorflow"),
    ],
    "constructed-windows-native.json": [
        ("CPU_ONLY_BUILD", "error", "tensorflow"),
        ("CPU_ONLY_BUILD", "error", "torch"),
    ],
    "constructed-macos-arm64.json": [
        ("CPU_ONLY_BUILD", "error", "tensorflow"),
        ("CPU_ONLY_BUILD", "error", "torch"),
    ],
    "constructed-wsl-no-driver.json": [("NO_DRIVER", "error", None)],
    "constructed-container-without-runtime.json": [("NO_DRIVER", "error", None)],
    "constructed-linux-missing-libs.json": [("MISSING_CUDA_LIBS", "error", "tensorflow")],
    "constructed-linux-kepler-old-driver.json": [
        ("DRIVER_TOO_OLD", "error", "tensorflow"),
        ("UNSUPPORTED_ARCH", "error", "tensorflow"),
    ],
    "constructed-driver-library-mismatch.json": [("NO_DRIVER", "error", None)],
    "constructed-linux-cuda-visible-devices-out-of-range.json": [("GPUS_HIDDEN", "error", None)],
    "constructed-linux-tensorflow-gpu-package.json": [
        ("DEPRECATED_PACKAGE", "warning", "tensorflow"),
        ("UNSUPPORTED_ARCH", "warning", "tensorflow"),
        ("TF_MEMORY_GROWTH", "info", "tensorflow"),
    ],
    "constructed-linux-tensorflow-probe-timeout.json": [
        ("PROBE_TIMED_OUT", "warning", "tensorflow"),
        ("TF_MEMORY_GROWTH", "info", "tensorflow"),
    ],
    "captured-linux-docker-no-driver.json": [
        ("CPU_ONLY_BUILD", "error", "torch"),
        ("CPU_ONLY_BUILD", "error", "jax"),
        ("NO_DRIVER", "error", None),
    ],
}


def test_every_facts_file_has_an_expectation_and_a_label() -> None:
    names = sorted(p.name for p in FACTS.glob("*.json"))
    assert names == sorted(EXPECTED)
    for name in names:
        facts = load(name)
        if name.startswith("constructed-"):
            assert str(facts["constructed"]).startswith("constructed: imitates ")
        else:
            assert "constructed" not in facts


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_findings_of_each_facts_file(name: str) -> None:
    assert summary(evaluate(load(name))) == EXPECTED[name]


def test_no_driver_in_a_container_names_the_runtime_and_the_host_driver() -> None:
    [finding] = evaluate(load("constructed-container-without-runtime.json"))
    assert finding.evidence["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert "NVIDIA_VISIBLE_DEVICES=all is set" in finding.title
    assert "docker run --gpus all" in finding.fix
    assert ">= 555.42.06 (TensorFlow 2.21.0 is built with CUDA 12.5.1)" in finding.fix


def test_wsl_asks_for_the_windows_driver_from_the_windows_column() -> None:
    [finding] = evaluate(load("constructed-wsl-no-driver.json"))
    assert finding.evidence["wsl"] is True
    assert ">= 555.85" in finding.fix and "Windows host" in finding.fix
    assert "Do not install a Linux NVIDIA driver inside WSL" in finding.fix


def test_driver_too_old_gives_the_driver_needed_and_an_alternative() -> None:
    findings = evaluate(load("constructed-linux-old-driver.json"))
    torch, tf = by_code(findings, "DRIVER_TOO_OLD")
    assert torch.evidence["driver_cuda"] == "12.2" and torch.evidence["build_cuda"] == "13.2"
    # 13.2 is not in NVIDIA's table: the 13.1 row is a lower bound, and the fix says so.
    assert torch.evidence["required_driver"] == "590.44.01"
    assert torch.evidence["required_driver_exact"] is False
    assert "CUDA 13.2 may need newer" in torch.fix
    assert tf.evidence["required_driver"] == "555.42.06" and "minor-version" in tf.title


def test_the_kepler_machine_gets_both_independent_causes() -> None:
    findings = evaluate(load("constructed-linux-kepler-old-driver.json"))
    [arch] = by_code(findings, "UNSUPPORTED_ARCH")
    assert arch.evidence["compute_capability"] == "3.7"
    assert "oldest: sm_60" in arch.fix


def test_missing_libraries_come_from_the_loader_and_the_fix_is_the_and_cuda_extra() -> None:
    [finding] = evaluate(load("constructed-linux-missing-libs.json"))
    assert finding.evidence["missing"] == ["libcudart.so.12", "libcublas.so.12", "libcudnn.so.9"]
    assert "Cannot dlopen some GPU libraries" in finding.evidence["log"][0]
    assert finding.fix == '/home/user/venv/bin/python -m pip install "tensorflow[and-cuda]==2.21.0"'


def test_native_windows_tensorflow_recommends_wsl2_and_torch_a_cuda_wheel() -> None:
    tf, torch = evaluate(load("constructed-windows-native.json"))
    assert "native Windows" in tf.title and "WSL2" in tf.fix
    assert "tensorflow<2.11" not in tf.fix  # TensorFlow 2.10 does not run on Python 3.11
    assert "--index-url https://download.pytorch.org/whl/cu126" in torch.fix
    assert torch.fix.startswith("C:\\Users\\me\\proj\\.venv\\Scripts\\python.exe -m pip")


def test_native_windows_on_python_3_10_may_also_downgrade() -> None:
    facts = load("constructed-windows-native.json")
    facts["python"]["version"] = "3.10.11"
    [tf] = [f for f in evaluate(facts) if f.evidence.get("framework") == "tensorflow"]
    assert '"tensorflow<2.11"' in tf.fix and "CUDA 11.2 and cuDNN 8.1" in tf.fix


def test_old_tensorflow_has_no_and_cuda_extra() -> None:
    [deprecated] = by_code(
        evaluate(load("constructed-linux-tensorflow-gpu-package.json")), "DEPRECATED_PACKAGE"
    )
    assert '"tensorflow==2.10.1"' in deprecated.fix and "and-cuda" not in deprecated.fix
    assert "CUDA 11.2 and cuDNN 8.1" in deprecated.fix


def test_tf_memory_growth_reads_the_variable_exactly() -> None:
    facts = load("constructed-linux-a100-healthy.json")
    titles = {}
    for value in (None, "true", "false", "1", "True"):
        changed = copy.deepcopy(facts)
        if value is not None:
            changed["environment"]["TF_FORCE_GPU_ALLOW_GROWTH"] = value
        [finding] = evaluate(changed)
        assert finding.code == "TF_MEMORY_GROWTH" and finding.severity.value == "info"
        titles[value] = finding.title
    assert "is on" in titles["true"] and "reserves nearly all" in titles["false"]
    assert "is ignored" in titles["1"] and "is ignored" in titles["True"]  # TF compares exactly
    changed = copy.deepcopy(facts)
    changed["environment"]["KERAS_BACKEND"] = "jax"  # Keras sets the variable itself then
    assert evaluate(changed) == []


def test_no_driver_hides_secondary_problems_but_not_independent_ones() -> None:
    facts = load("constructed-linux-missing-libs.json")
    facts["nvml"] = {"status": "library_not_found", "error": "NVML Shared Library Not Found"}
    # Missing CUDA libraries cannot matter before there is a driver: only NO_DRIVER.
    assert summary(evaluate(facts)) == [("NO_DRIVER", "error", None)]
    facts["distributions"]["tensorflow-cpu"] = {"version": "2.21.0", "provides": ["tensorflow"]}
    facts["environment"]["CUDA_VISIBLE_DEVICES"] = "-1"
    # A second tensorflow distribution and a hiding variable stand on their own.
    assert summary(evaluate(facts)) == [
        ("GPUS_HIDDEN", "error", None),
        ("NO_DRIVER", "error", None),
        ("CONFLICTING_PACKAGES", "warning", "tensorflow"),  # the CUDA build is what imports
    ]


def test_an_unexplained_missing_gpu_is_reported_with_the_framework_log() -> None:
    facts = load("constructed-linux-a100-healthy.json")
    facts["frameworks"]["tensorflow"]["gpus"] = []
    facts["frameworks"]["tensorflow"]["gpu_details"] = []
    facts["frameworks"]["tensorflow"]["log"] = ["gpu_device.cc:99] something unexpected"]
    [finding] = by_code(evaluate(facts), "FRAMEWORK_NO_GPU")
    assert finding.evidence["log"] == ["gpu_device.cc:99] something unexpected"]
    assert "TF_CPP_MIN_LOG_LEVEL=0" in finding.fix


def test_an_import_failing_on_a_cuda_library_is_missing_libs_even_without_a_driver() -> None:
    facts = load("captured-linux-docker-no-driver.json")
    facts["frameworks"]["torch"] = {
        "probe": "ok",
        "imported": False,
        "import_error": "OSError: libcudnn.so.9: cannot open shared object file: No such file",
    }
    findings = evaluate(facts)
    [missing] = by_code(findings, "MISSING_CUDA_LIBS")
    assert missing.evidence == {
        "framework": "torch",
        "missing": ["libcudnn.so.9"],
        "import_error": facts["frameworks"]["torch"]["import_error"],
    }
    assert "--force-reinstall" in missing.fix
    lines = verdicts(facts, findings)
    assert any(line.startswith("PyTorch 2.13.0+cpu: cannot be imported") for line in lines)


def test_verdicts_name_the_root_causes_per_framework() -> None:
    facts = load("captured-linux-docker-no-driver.json")
    assert verdicts(facts, evaluate(facts)) == [
        "TensorFlow 2.21.0: will run on CPU only — no NVIDIA driver in this docker container",
        "PyTorch 2.13.0+cpu: will run on CPU only — CPU-only build (torch 2.13.0+cpu); no NVIDIA"
        " driver in this docker container",
        "JAX 0.10.2: will run on CPU only — CPU-only build (jaxlib 0.10.2, jax 0.10.2); no NVIDIA"
        " driver in this docker container",
    ]
    healthy = load("constructed-linux-a100-healthy.json")
    assert verdicts(healthy, evaluate(healthy)) == [
        "TensorFlow 2.21.0: will use 1 GPU (NVIDIA A100-SXM4-80GB)",
        "PyTorch 2.7.0+cu128: will use 1 GPU (NVIDIA A100-SXM4-80GB)",
        "JAX 0.10.2: will use 1 GPU (NVIDIA A100-SXM4-80GB)",
    ]


def test_rules_tolerate_a_sparse_facts_document() -> None:
    sparse = {
        "kind": "gpuwhy.facts",
        "schema_version": 1,
        "system": {},
        "environment": {},
        "nvml": {},
        "python": {},
        "distributions": {},
        "libraries": {},
        "frameworks": {},
    }
    assert evaluate(sparse) == []
    assert verdicts(sparse, []) == ["No TensorFlow, PyTorch or JAX installed in python"]
