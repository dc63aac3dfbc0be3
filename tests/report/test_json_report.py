"""The JSON report contract: every produced report validates against the published schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from constructed import GPU_OK_ENV, H100, NO_GPU_ENV, Run, device

from gpuwhy.analysis import diagnose
from gpuwhy.model import JSON_SCHEMA_VERSION
from gpuwhy.report import json_report

GiB = 2**30
CONTRACT_KEYS = {
    "schema_version",
    "command",
    "exit_code",
    "duration_s",
    "environment",
    "devices",
    "phases",
    "findings",
}
PHASE_KEYS = {"time_s", "share", "steps", "step_time_s", "data_wait_fraction", "gpu_util"}
FINDING_KEYS = {"code", "severity", "title", "evidence", "fix", "speedup", "speedup_method"}


def _gpu_run(path: Path) -> Run:
    run = Run(path, duration_s=12, devices=[H100, device(1)], environment=GPU_OK_ENV)
    end = run.steps("train", 1, 100, 0.04, wait_s=0.06)
    run.phase("train", 1, end).phase("validation", end, 12)
    run.steps("validation", end, 5, 0.1)
    run.gpu(0, 1, end, util_gpu_pct=30, job_memory_bytes=GiB, sm_active_permille=250)
    run.gpu(0, end, 12, util_gpu_pct=90, job_memory_bytes=GiB, sm_active_permille=700)
    run.gpu(1, 0, 12, util_gpu_pct=0, job_memory_bytes=0)
    return run


def _cpu_run(path: Path) -> Run:
    run = Run(path, duration_s=8, environment=NO_GPU_ENV)
    end = run.steps("train", 1, 50, 0.05, wait_s=0.02, per_span=5)
    run.phase("train", 1, end)
    return run


def _empty_run(path: Path) -> Run:
    return Run(path, duration_s=0.5, command=())


@pytest.mark.parametrize("make", [_gpu_run, _cpu_run, _empty_run])
def test_every_report_validates_against_the_schema(tmp_path: Path, make: object) -> None:
    with make(tmp_path / "r.db").close() as recording:  # type: ignore[operator]
        report = json_report.to_dict(diagnose(recording))
    jsonschema.Draft202012Validator.check_schema(json_report.schema())
    jsonschema.validate(
        report, json_report.schema(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    assert set(report) >= CONTRACT_KEYS
    assert report["schema_version"] == JSON_SCHEMA_VERSION
    assert json.loads(json.dumps(report)) == report  # plain JSON, no NaN
    for phase in report["phases"].values():
        assert set(phase) >= PHASE_KEYS
    for finding in report["findings"] + report["environment"]["findings"]:
        assert set(finding) == FINDING_KEYS


def test_gpu_report_carries_phases_devices_and_ordered_findings(tmp_path: Path) -> None:
    with _gpu_run(tmp_path / "r.db").close() as recording:
        report = json_report.to_dict(diagnose(recording))
    train = report["phases"]["train"]
    assert train["steps"] == 100 and train["data_wait_fraction"] == pytest.approx(0.6)
    assert train["gpu_util"] == {"0": 30.0, "1": 0.0}
    assert train["step_time_s"]["p50"] == pytest.approx(0.04)
    assert report["phases"]["other"]["share"] == pytest.approx(1 / 12, abs=1e-3)
    assert [d["index"] for d in report["devices"]] == [0, 1]
    assert report["devices"][1]["job_seen"] is False
    codes = [f["code"] for f in report["findings"]]
    assert codes[0] == "INPUT_BOUND" and "IDLE_GPUS" in codes and "PHASE_GPU_GAP" in codes
    speedups = [f["speedup"] for f in report["findings"] if f["severity"] == "warning"]
    assert speedups == sorted(speedups, reverse=True)


def test_cpu_report_embeds_the_environment_and_no_gpu_numbers(tmp_path: Path) -> None:
    with _cpu_run(tmp_path / "r.db").close() as recording:
        report = json_report.to_dict(diagnose(recording))
    assert report["devices"] == []
    assert report["environment"]["findings"][0]["code"] == "NO_DRIVER"
    assert report["environment"]["facts"] == {"schema_version": 1}
    assert report["phases"]["train"]["gpu_util"] is None
    assert report["phases"]["train"]["steps"] == 50
    assert report["verdict"].startswith("GPU not usable: No NVIDIA driver")


def test_schema_rejects_a_report_missing_a_contract_field(tmp_path: Path) -> None:
    with _cpu_run(tmp_path / "r.db").close() as recording:
        report = json_report.to_dict(diagnose(recording))
    del report["phases"]["train"]["data_wait_fraction"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(report, json_report.schema())
