"""Safe to share: a real job started with credentials in its arguments, its environment and its
output leaves none of them in anything gpuwhy writes — the recording, the JSON and HTML reports,
the terminal report, the Perfetto export — and `--no-redact` keeps them only where asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuwhy.redact import MASK, recorded_command, redact_command
from support import ROOT

SRC = ROOT / "src"
# Each shape from docs/sharing.md, with the secret value a leak would show.
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
HUB = "hf_" + "q9W8e7R6t5Y4u3I2o1P0a9S8d7F6g5H4j3"
AWS = "AKIA" + "ABCDEFGHIJKLMNOP"
PASSWORD = "hunter2-very-secret"
API_KEY = "k3y-only-for-this-test"
URL_PASSWORD = "pa55w0rd-s3cret"
BEARER = "b3arer-t0ken-value"
PRIVATE_KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"
ENV_SECRET = "env-only-s3cret-value"
ARGS = [
    f"--token={GITHUB}",
    "--password",
    PASSWORD,
    "--api-key",
    API_KEY,
    f"HF_TOKEN={HUB}",
    f"https://alice:{URL_PASSWORD}@example.com/data",
    AWS,
    f"Authorization: Bearer {BEARER}",
    f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PRIVATE_KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----",
]
SECRETS = [GITHUB, HUB, AWS, PASSWORD, API_KEY, URL_PASSWORD, BEARER, PRIVATE_KEY_BODY, ENV_SECRET]
# The job prints a secret of its own: its output is its own, never gpuwhy's to keep.
JOB = "import os, sys, time; print(os.environ['WANDB_API_KEY']); time.sleep(0.3)"


def _gpuwhy(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "WANDB_API_KEY": ENV_SECRET}
    return subprocess.run(
        [sys.executable, "-m", "gpuwhy", *args],
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        timeout=180,
        check=False,
    )


def _record(tmp_path: Path, *flags: str) -> dict[str, Any]:
    """Run the job under gpuwhy with every output; what each output holds, as text."""
    record, report, page, trace = (
        tmp_path / n for n in ("r.gpuwhy.db", "r.json", "r.html", "r.trace.json")
    )
    run = _gpuwhy(
        [
            "run",
            *flags,
            "--record",
            str(record),
            "--json",
            str(report),
            "--html",
            str(page),
            "--",
            sys.executable,
            "-c",
            JOB,
            *ARGS,
        ],
        tmp_path,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    again = _gpuwhy(["report", str(record)], tmp_path)
    exported = _gpuwhy(["export", str(record), "--perfetto", str(trace)], tmp_path)
    assert again.returncode in (0, 1) and exported.returncode == 0, exported.stderr
    files = {
        p.name: p.read_bytes().decode("utf-8", "replace")
        for p in tmp_path.glob("r.*")
        if p.is_file()
    }
    # gpuwhy's own lines only: the job's stdout (its own print) passes through untouched.
    streams = {
        "run stderr": run.stderr,
        "report": again.stdout + again.stderr,
        "export": exported.stdout + exported.stderr,
    }
    return {
        "files": files,
        "streams": streams,
        "job_stdout": run.stdout,
        "report": json.loads(report.read_text()),
    }


@pytest.mark.slow
def test_no_secret_reaches_anything_gpuwhy_writes(tmp_path: Path) -> None:
    found = _record(tmp_path)
    assert {"r.gpuwhy.db", "r.json", "r.html", "r.trace.json"} <= set(found["files"])
    leaks = [
        (where, secret)
        for where, text in {**found["files"], **found["streams"]}.items()
        for secret in SECRETS
        if secret in text
    ]
    assert leaks == []
    assert ENV_SECRET in found["job_stdout"]  # the job's own output is left alone
    command = found["report"]["command"]
    assert found["report"]["command_redacted"] is True
    assert f"--token={MASK}" in command and "--password" in command and MASK in command
    assert "https://alice:***@example.com/data" in command  # what is not secret stays readable


@pytest.mark.slow
def test_no_redact_keeps_the_command_as_typed_and_says_so(tmp_path: Path) -> None:
    found = _record(tmp_path, "--no-redact")
    assert found["report"]["command_redacted"] is False
    assert found["report"]["command"][-len(ARGS) :] == ARGS
    assert GITHUB in found["files"]["r.gpuwhy.db"] and GITHUB in found["files"]["r.html"]
    assert "not redacted: recorded with --no-redact" in found["files"]["r.html"]
    assert "not redacted" in found["streams"]["report"]
    assert ENV_SECRET not in found["files"]["r.gpuwhy.db"]  # the environment is never kept


def test_an_older_recording_is_masked_when_shown() -> None:
    """A recording written before masking at entry keeps its command raw: outputs mask it."""
    meta = {"command": ["python", "train.py", f"--token={GITHUB}"]}
    assert recorded_command(meta) == ["python", "train.py", f"--token={MASK}"]
    assert recorded_command({**meta, "redaction": "off"}) == meta["command"]
    assert recorded_command({}) == []


@pytest.mark.parametrize(
    ("arg", "masked"),
    [
        (f"Authorization: Bearer {BEARER}", f"Authorization: Bearer {MASK}"),
        (
            f"-----BEGIN RSA PRIVATE KEY-----\n{PRIVATE_KEY_BODY}\n-----END RSA PRIVATE KEY-----",
            MASK,
        ),
        (AWS, MASK),
        ("--lr=0.001", "--lr=0.001"),
        ("data/train-bearer.csv", "data/train-bearer.csv"),
    ],
)
def test_shapes(arg: str, masked: str) -> None:
    assert redact_command([arg]) == [masked]
