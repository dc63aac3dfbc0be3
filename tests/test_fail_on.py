"""`--fail-on CODES` of `gpuwhy run` and `gpuwhy report`: the CI gate, end to end.

`report` is checked on a committed real recording (tests/data/recordings: a Keras job whose
tf.data map is slow, captured on a CPU-only machine: INPUT_BOUND, and NO_DRIVER in its
environment). `run` is checked on a real PyTorch job with a slow `__getitem__`.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpuwhy.cli import fail_on
from gpuwhy.errors import ExitCode, UsageError
from support import DATA, framework_env

SRC = Path(__file__).resolve().parents[1] / "src"
SLOW_MAP = DATA / "recordings" / "cpu-keras-tf-slow-map.gpuwhy.db"
GATE = int(ExitCode.FINDINGS_MATCHED)

# A real training whose DataLoader reads each sample with a delay (num_workers=0): its steps
# wait for data most of the time. Exits with the code given as its argument.
SLOW_LOADER_JOB = """\
import sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class SlowDataset(Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, index):
        time.sleep(0.004)
        return torch.ones(8), torch.tensor(index % 2)

model = torch.nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in DataLoader(SlowDataset(), batch_size=16):
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
sys.exit(int(sys.argv[1]))
"""


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(SRC))


def gpuwhy(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuwhy", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _gate_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("gpuwhy: --fail-on")]


# -- the list: codes, severities, mistakes -------------------------------------------------------


def test_comma_lists_repeated_flags_and_any_case_add_up() -> None:
    gate = fail_on.parse(["input_bound,Not_On_Gpu", " SLOW_VALIDATION ,", "warning"], "run")
    assert gate is not None
    assert gate.codes == {"INPUT_BOUND", "NOT_ON_GPU", "SLOW_VALIDATION"}
    assert gate.severities == {"warning", "error"}  # "warning" = warning or worse
    assert fail_on.parse([], "run") is None  # no flag: no gate


def test_every_code_of_the_rules_and_the_environment_is_accepted() -> None:
    from gpuwhy.analysis import RUNTIME_CODES
    from gpuwhy.env import codes

    gate = fail_on.parse([",".join((*RUNTIME_CODES, *codes.ALL))], "report")
    assert gate is not None and gate.codes == {*RUNTIME_CODES, *codes.ALL}


@pytest.mark.parametrize("values", [["INPUT_BOUNDS"], ["INPUT_BOUND,bogus"], [","], [""]])
def test_unknown_or_empty_lists_are_usage_errors(values: list[str]) -> None:
    with pytest.raises(UsageError) as caught:
        fail_on.parse(values, "run")
    assert caught.value.exit_code is ExitCode.USAGE
    assert "valid: error, warning, NOT_ON_GPU, INPUT_BOUND" in caught.value.one_line()


def test_a_gate_that_cannot_be_checked_fails_unless_the_job_failed_first() -> None:
    gate = fail_on.parse(["INPUT_BOUND"], "run")
    out = io.StringIO()
    assert fail_on.exit_code(gate, None, "ValueError: boom", out, job_exit_code=0) == 70
    assert out.getvalue() == "gpuwhy: --fail-on: cannot check the findings (ValueError: boom)\n"
    assert fail_on.exit_code(gate, None, "boom", io.StringIO(), job_exit_code=9) is None
    assert fail_on.exit_code(None, None, "boom", io.StringIO(), job_exit_code=0) is None


def test_unknown_code_is_one_line_naming_the_valid_ones(tmp_path: Path) -> None:
    result = gpuwhy(["report", str(SLOW_MAP), "--fail-on", "INPUT_BOUNDS"], tmp_path)
    assert result.returncode == ExitCode.USAGE
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "unknown finding code 'INPUT_BOUNDS' (did you mean INPUT_BOUND?)" in result.stderr
    assert "NO_DRIVER" in result.stderr and "SLOW_VALIDATION" in result.stderr


def test_run_checks_the_list_before_starting_anything(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    code = f"open({str(marker)!r}, 'w')"
    result = gpuwhy(["run", "--fail-on", "NOPE", "--", sys.executable, "-c", code], tmp_path)
    assert result.returncode == ExitCode.USAGE
    assert not marker.exists() and not (tmp_path / "gpuwhy-runs").exists()


# -- report --------------------------------------------------------------------------------------


def test_report_fails_when_a_listed_finding_appears(tmp_path: Path) -> None:
    result = gpuwhy(["report", str(SLOW_MAP), "--fail-on", "NOT_ON_GPU,input_bound"], tmp_path)
    assert result.returncode == GATE == 4
    assert "INPUT_BOUND" in result.stdout  # the report itself is shown as usual
    assert _gate_lines(result.stderr) == ["gpuwhy: --fail-on: found INPUT_BOUND (exit code 4)"]


def test_report_passes_when_no_listed_finding_appears(tmp_path: Path) -> None:
    result = gpuwhy(
        ["report", str(SLOW_MAP), "--fail-on", "SLOW_VALIDATION", "--fail-on", "HOST_BOUND"],
        tmp_path,
    )
    assert result.returncode == ExitCode.OK
    assert _gate_lines(result.stderr) == []


def test_environment_findings_count_when_they_concern_the_job(tmp_path: Path) -> None:
    # The recording's interpreter also held CPU-only torch and jax builds: findings about
    # other frameworks than the job's (Keras on TensorFlow) do not fail it; no driver does.
    with_other = gpuwhy(["report", str(SLOW_MAP), "--json"], tmp_path)
    environment = json.loads(with_other.stdout)["environment"]["findings"]
    frameworks = {
        f["evidence"].get("framework") for f in environment if f["code"] == "CPU_ONLY_BUILD"
    }
    assert frameworks == {"torch", "jax"}
    assert (
        gpuwhy(["report", str(SLOW_MAP), "--fail-on", "CPU_ONLY_BUILD"], tmp_path).returncode
        == ExitCode.OK
    )
    by_code = gpuwhy(["report", str(SLOW_MAP), "--fail-on", "NO_DRIVER"], tmp_path)
    assert by_code.returncode == GATE
    assert _gate_lines(by_code.stderr) == ["gpuwhy: --fail-on: found NO_DRIVER (exit code 4)"]


def test_severity_words_match_that_severity_or_worse(tmp_path: Path) -> None:
    warning = gpuwhy(["report", str(SLOW_MAP), "--fail-on", "warning"], tmp_path)
    assert warning.returncode == GATE
    assert _gate_lines(warning.stderr) == [
        "gpuwhy: --fail-on: found INPUT_BOUND, NO_DRIVER (exit code 4)"
    ]
    error = gpuwhy(["report", str(SLOW_MAP), "--fail-on", "ERROR"], tmp_path)
    assert error.returncode == GATE
    assert _gate_lines(error.stderr) == ["gpuwhy: --fail-on: found NO_DRIVER (exit code 4)"]


def test_report_json_keeps_stdout_for_the_document(tmp_path: Path) -> None:
    result = gpuwhy(["report", str(SLOW_MAP), "--json", "--fail-on", "INPUT_BOUND"], tmp_path)
    assert result.returncode == GATE
    assert json.loads(result.stdout)["findings"][0]["code"] == "INPUT_BOUND"


def test_help_and_epilog_document_the_gate_code(tmp_path: Path) -> None:
    top = gpuwhy(["--help"], tmp_path).stdout
    assert "4    a finding listed in --fail-on appeared (run, report)" in top
    for command in ("run", "report"):
        text = gpuwhy([command, "--help"], tmp_path).stdout
        assert "--fail-on CODES" in text and "4" in text


# -- run -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_run_gate_code_child_code_and_child_failure(tmp_path: Path) -> None:
    """Three real runs side by side: a match, no match, a match in a job that failed."""
    python = str(framework_env("torch-cpu"))
    (tmp_path / "job.py").write_text(SLOW_LOADER_JOB)
    cases = {
        "match": (["--fail-on", "INPUT_BOUND"], "0"),
        "no-match": (["--fail-on", "NOT_ON_GPU,SLOW_VALIDATION", "--fail-on", "THROTTLED"], "0"),
        "job-failed": (["--fail-on", "input_bound"], "3"),
    }
    running = {
        name: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpuwhy",
                "run",
                "--record",
                f"{name}.gpuwhy.db",
                "--json",
                f"{name}.json",
                *flags,
                "--",
                python,
                "job.py",
                code,
            ],
            cwd=tmp_path,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, (flags, code) in cases.items()
    }
    results = {
        name: (process.wait(timeout=180), process.communicate()[1])
        for name, process in running.items()
    }
    for name in cases:  # the job is input-bound in every run: the gate decides on that
        codes = [f["code"] for f in json.loads((tmp_path / f"{name}.json").read_text())["findings"]]
        assert codes[0] == "INPUT_BOUND", (name, codes, results[name][1][-2000:])

    code, stderr = results["match"]
    assert code == GATE, stderr[-2000:]
    assert _gate_lines(stderr) == ["gpuwhy: --fail-on: found INPUT_BOUND (exit code 4)"]
    assert stderr.rstrip().endswith("found INPUT_BOUND (exit code 4)")  # the last word

    code, stderr = results["no-match"]
    assert code == ExitCode.OK, stderr[-2000:]
    assert _gate_lines(stderr) == []

    code, stderr = results["job-failed"]
    assert code == 3, stderr[-2000:]  # the command's own failure wins over the gate
    assert _gate_lines(stderr) == [
        "gpuwhy: --fail-on: found INPUT_BOUND (exit code 3: the command's own)"
    ]
