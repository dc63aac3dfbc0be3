"""`gpuwhy doctor` end to end: a real `python -m gpuwhy doctor` in a temporary folder."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from support import DATA, framework_env

SRC = Path(__file__).resolve().parents[1] / "src"
FACTS = DATA / "facts"
CAPTURED = FACTS / "captured-linux-docker-no-driver.json"
ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*(3[0-9]|9[0-7]|38;)")


def gpuwhy(
    args: Sequence[str],
    cwd: Path,
    timeout: float = 300,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_VISIBLE_DEVICES", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE")
    }
    environ.update(env)
    environ["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(SRC)) if p)
    return subprocess.run(
        [sys.executable, "-m", "gpuwhy", "doctor", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("gpuwhy: "), done.stderr
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr


# --- usage errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--bogus"], ["unrecognized arguments: --bogus"]),
        (["--timeout", "0"], ["--timeout"]),
        (["--timeout", "soon"], ["not a number of seconds"]),
        (["--from", "x.json", "--python", "python3"], ["not allowed with argument"]),
        (["--from", str(CAPTURED), "--timeout", "5"], ["--timeout has no effect with --from"]),
    ],
)
def test_usage_errors_are_one_line(tmp_path: Path, args: list[str], words: list[str]) -> None:
    one_line_error(gpuwhy(args, tmp_path), *words)


def test_from_a_missing_file(tmp_path: Path) -> None:
    one_line_error(gpuwhy(["--from", "nope.json"], tmp_path), "nope.json: no such file")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('{"kind": "gpuwhy.facts", "schema_ver', ["is not valid JSON"]),
        ("\x00\x01binary", ["is not valid JSON"]),
        ('{"hello": "world"}', ["is not a gpuwhy facts file"]),
        ("[1, 2, 3]", ["is not a gpuwhy facts file"]),
        ('{"kind": "gpuwhy.facts", "schema_version": 99}', ["newer than this gpuwhy reads"]),
        ('{"kind": "gpuwhy.facts", "schema_version": 1, "system": {}}', ["incomplete facts file"]),
    ],
)
def test_from_a_file_that_is_not_facts(tmp_path: Path, content: str, words: list[str]) -> None:
    (tmp_path / "bad.json").write_text(content)
    one_line_error(gpuwhy(["--from", "bad.json"], tmp_path), "bad.json", *words)


def test_python_that_does_not_exist_or_is_a_folder(tmp_path: Path) -> None:
    one_line_error(gpuwhy(["--python", "missing/python"], tmp_path), "no such file")
    one_line_error(gpuwhy(["--python", str(tmp_path)], tmp_path), "is a directory", "bin")


def test_python_that_is_not_a_python(tmp_path: Path) -> None:
    script = tmp_path / "fake-python"
    script.write_text("#!/bin/sh\necho 'I am not Python'\n")
    script.chmod(0o755)
    one_line_error(gpuwhy(["--python", str(script)], tmp_path), "is not a Python interpreter")
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    one_line_error(gpuwhy(["--python", str(text)], tmp_path), "cannot be run")


def test_python_2_is_refused(tmp_path: Path) -> None:
    found = sorted(Path(os.path.expanduser("~/.pyenv/versions")).glob("2.*/bin/python"))
    if not found:
        pytest.skip("no Python 2 on this machine")
    done = gpuwhy(["--python", str(found[-1])], tmp_path)
    one_line_error(done, "not a Python interpreter (>= 3.8)")


def test_save_to_an_unwritable_place(tmp_path: Path) -> None:
    done = gpuwhy(
        ["--from", str(CAPTURED), "--save", str(tmp_path / "no" / "dir" / "f.json")], tmp_path
    )
    one_line_error(done, "cannot write")


# --- output ---------------------------------------------------------------------------------


def test_json_document(tmp_path: Path) -> None:
    done = gpuwhy(["--from", str(CAPTURED), "--json"], tmp_path)
    assert done.returncode == 1 and done.stderr == ""
    report = json.loads(done.stdout)
    assert set(report) == {"schema_version", "facts", "findings", "verdicts"}
    assert report["schema_version"] == 1 and report["facts"]["kind"] == "gpuwhy.facts"
    for item in report["findings"]:
        assert set(item) == {
            "code",
            "severity",
            "title",
            "evidence",
            "fix",
            "speedup",
            "speedup_method",
        }
        assert item["severity"] in ("error", "warning", "info") and item["fix"]


def test_terminal_report_is_plain_text_through_a_pipe(tmp_path: Path) -> None:
    done = gpuwhy(["--from", str(CAPTURED)], tmp_path)
    assert done.returncode == 1 and done.stderr == ""
    assert "\x1b[" not in done.stdout
    lines = done.stdout.splitlines()
    assert lines[0] == "gpuwhy doctor"
    assert "Errors (3)" in lines
    assert lines[lines.index("Verdict") + 1 :] == [
        "  TensorFlow 2.21.0: will run on CPU only — no NVIDIA driver in this docker container",
        "  PyTorch 2.13.0+cpu: will run on CPU only — CPU-only build (torch 2.13.0+cpu); no NVIDIA"
        " driver in this docker container",
        "  JAX 0.10.2: will run on CPU only — CPU-only build (jaxlib 0.10.2, jax 0.10.2); no NVIDIA"
        " driver in this docker container",
    ]
    # A fix is one line, whole, brackets included (copy-paste must work).
    assert (
        '      fix: /work/main/.venv/bin/python -m pip install "jax[cuda13]==0.10.2" (needs driver'
        ' >= 580; with an older driver >= 525 use "jax[cuda12]==0.10.2")'
    ) in lines


def test_colour_on_a_forced_terminal_and_none_with_no_color(tmp_path: Path) -> None:
    coloured = gpuwhy(["--from", str(CAPTURED)], tmp_path, FORCE_COLOR="1")
    assert ANSI_COLOUR.search(coloured.stdout)
    plain = gpuwhy(["--from", str(CAPTURED)], tmp_path, FORCE_COLOR="1", NO_COLOR="1")
    assert not ANSI_COLOUR.search(plain.stdout)
    assert "Verdict" in plain.stdout


# --- the rules through --from ---------------------------------------------------------------

FROM_FILES: dict[str, tuple[int, list[str]]] = {
    "constructed-linux-a100-healthy.json": (0, ["TF_MEMORY_GROWTH"]),
    "constructed-linux-old-driver.json": (
        1,
        ["DRIVER_TOO_OLD", "DRIVER_TOO_OLD", "TF_MEMORY_GROWTH"],
    ),
    "constructed-linux-h100-mig.json": (
        1,
        [
            "MIG_NO_INSTANCES",
            "UNSUPPORTED_ARCH",
            "UNSUPPORTED_ARCH",
            "MIG_ENABLED",
            "TF_MEMORY_GROWTH",
        ],
    ),
    "constructed-windows-native.json": (1, ["CPU_ONLY_BUILD", "CPU_ONLY_BUILD"]),
    "constructed-macos-arm64.json": (1, ["CPU_ONLY_BUILD", "CPU_ONLY_BUILD"]),
    "constructed-wsl-no-driver.json": (1, ["NO_DRIVER"]),
    "constructed-container-without-runtime.json": (1, ["NO_DRIVER"]),
    "constructed-linux-missing-libs.json": (1, ["MISSING_CUDA_LIBS"]),
    "constructed-linux-kepler-old-driver.json": (1, ["DRIVER_TOO_OLD", "UNSUPPORTED_ARCH"]),
    "constructed-driver-library-mismatch.json": (1, ["NO_DRIVER"]),
    "constructed-linux-cuda-visible-devices-out-of-range.json": (1, ["GPUS_HIDDEN"]),
    "constructed-linux-tensorflow-gpu-package.json": (
        0,
        ["DEPRECATED_PACKAGE", "UNSUPPORTED_ARCH", "TF_MEMORY_GROWTH"],
    ),
    "constructed-linux-tensorflow-probe-timeout.json": (0, ["PROBE_TIMED_OUT", "TF_MEMORY_GROWTH"]),
    "captured-linux-docker-no-driver.json": (1, ["CPU_ONLY_BUILD", "CPU_ONLY_BUILD", "NO_DRIVER"]),
}


def test_every_facts_file_is_checked_through_the_command() -> None:
    assert sorted(FROM_FILES) == sorted(p.name for p in FACTS.glob("*.json"))


@pytest.mark.parametrize("name", sorted(FROM_FILES))
def test_rules_on_saved_facts(tmp_path: Path, name: str) -> None:
    status, expected = FROM_FILES[name]
    done = gpuwhy(["--from", str(FACTS / name), "--json"], tmp_path)
    assert done.stderr == ""
    assert done.returncode == status
    assert [f["code"] for f in json.loads(done.stdout)["findings"]] == expected


# --- probing for real -----------------------------------------------------------------------


def _report(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.stderr == "", done.stderr
    return dict(json.loads(done.stdout))


def test_save_then_from_gives_the_same_findings(tmp_path: Path) -> None:
    python = framework_env("bare")
    live = gpuwhy(["--python", str(python), "--save", "facts.json", "--json"], tmp_path)
    saved = gpuwhy(["--from", "facts.json", "--json"], tmp_path)
    assert live.returncode == saved.returncode
    first, again = _report(live), _report(saved)
    assert again["findings"] == first["findings"] and again["verdicts"] == first["verdicts"]
    assert json.loads((tmp_path / "facts.json").read_text()) == first["facts"]
    # The --json output itself is accepted too: a pasted report re-evaluates.
    (tmp_path / "report.json").write_text(live.stdout)
    pasted = _report(gpuwhy(["--from", "report.json", "--json"], tmp_path))
    assert pasted["findings"] == first["findings"]


def _fake_framework(root: Path, name: str, body: str) -> Path:
    """A distribution `name` whose import runs `body`: a framework stand-in that misbehaves."""
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(body)
    info = root / f"{name}-9.9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 9.9.9\n")
    (info / "RECORD").write_text(f"{name}/__init__.py,,\n")
    return root


@pytest.mark.slow
def test_a_hanging_framework_import_is_killed_at_the_deadline(tmp_path: Path) -> None:
    fake = _fake_framework(
        tmp_path / "site",
        "tensorflow",
        "import sys, time\nprint('failed call to cuInit', file=sys.stderr)\n"
        "sys.stderr.flush()\ntime.sleep(120)\n",
    )
    start = time.monotonic()
    done = gpuwhy(
        ["--python", str(framework_env("bare")), "--timeout", "4", "--json"],
        tmp_path,
        PYTHONPATH=str(fake),
    )
    elapsed = time.monotonic() - start
    report = _report(done)
    assert elapsed < 4 + 6
    probe = report["facts"]["frameworks"]["tensorflow"]
    assert probe["probe"] == "timed_out" and probe["error"].startswith("probe timed out after")
    assert probe["log"] == ["failed call to cuInit"]
    timed_out = [f for f in report["findings"] if f["code"] == "PROBE_TIMED_OUT"]
    assert [f["evidence"]["framework"] for f in timed_out] == ["tensorflow"]
    assert report["verdicts"][0].startswith("TensorFlow 9.9.9: will run on CPU only")


def test_ctrl_c_stops_doctor_and_its_probes(tmp_path: Path) -> None:
    marker = tmp_path / "probe.pid"
    fake = _fake_framework(
        tmp_path / "site",
        "tensorflow",
        f"import os, time\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n",
    )
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake), str(SRC)]))
    bare = str(framework_env("bare"))
    doctor = subprocess.Popen(
        [sys.executable, "-m", "gpuwhy", "doctor", "--python", bare, "--timeout", "100"],
        cwd=tmp_path,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    probe = int(marker.read_text())
    signals = Path(f"/proc/{doctor.pid}/status").read_text()  # if it stays deaf: why
    doctor.send_signal(signal.SIGINT)
    try:
        _, stderr = doctor.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        doctor.kill()
        doctor.communicate()
        masks = [line for line in signals.splitlines() if line.startswith("Sig")]
        raise AssertionError(f"doctor ignored Ctrl-C for 30 s: {masks}") from None
    assert doctor.returncode == 130 and stderr == "gpuwhy: interrupted\n"
    deadline = time.monotonic() + 5
    while _running(probe) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(probe), "a probe outlived gpuwhy"


def _running(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_a_framework_that_cannot_be_imported(tmp_path: Path) -> None:
    fake = _fake_framework(
        tmp_path / "site",
        "torch",
        "raise ImportError('cannot import name _C from partially initialized module torch')\n",
    )
    bare = str(framework_env("bare"))
    done = gpuwhy(["--python", bare, "--json"], tmp_path, PYTHONPATH=str(fake))
    report = _report(done)
    [failed] = [f for f in report["findings"] if f["code"] == "FRAMEWORK_IMPORT_FAILED"]
    assert "partially initialized module torch" in failed["evidence"]["import_error"]
    assert '-m pip install --force-reinstall "torch==9.9.9"' in failed["fix"]
    [verdict] = report["verdicts"]
    assert verdict.startswith("PyTorch 9.9.9: cannot be imported — ImportError: cannot import name")


def test_a_framework_whose_import_crashes_the_interpreter(tmp_path: Path) -> None:
    fake = _fake_framework(tmp_path / "site", "jax", "import ctypes\nctypes.string_at(0)\n")
    bare = str(framework_env("bare"))
    report = _report(gpuwhy(["--python", bare, "--json"], tmp_path, PYTHONPATH=str(fake)))
    assert report["facts"]["frameworks"]["jax"]["probe"] == "failed"
    [crashed] = [f for f in report["findings"] if f["code"] == "FRAMEWORK_IMPORT_FAILED"]
    assert crashed["title"] == "Importing JAX 9.9.9 crashed the interpreter"
    assert crashed["evidence"]["exit_status"] == -11  # SIGSEGV
    assert report["verdicts"][0].startswith("JAX 9.9.9: cannot be imported — ")


@pytest.mark.slow
def test_doctor_answers_within_20_seconds_with_all_three_frameworks(tmp_path: Path) -> None:
    import importlib.util

    if not all(importlib.util.find_spec(m) for m in ("tensorflow", "torch", "jax")):
        pytest.skip("needs TensorFlow, PyTorch and JAX in the running interpreter")
    start = time.monotonic()
    done = gpuwhy([], tmp_path)  # the default deadline, this interpreter
    elapsed = time.monotonic() - start
    assert done.returncode in (0, 1) and done.stderr == ""
    assert "Verdict" in done.stdout
    assert elapsed < 20, f"doctor took {elapsed:.1f} s"
