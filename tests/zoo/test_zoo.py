"""gpuwhy on the zoo (members.py): each script run under `gpuwhy run`, and the facts that must
hold on it — its output and exit code untouched, its framework detected, the phases it has with
exactly the steps it ran, its data wait present or absent as it was built. Its output is held to
the same script run bare, beside it, once per script, interpreter and launcher: the members that
only change a script's flags (its input pipeline, its sizes) run through the same hooks.

With GPUWHY_ZOO_RESULTS=DIR each run also writes what gpuwhy saw to DIR/<index>.json, from which
`bench/zoo_matrix.py` writes docs/compatibility.md.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support import framework_env
from zoo.members import MEMBERS, Member

pytestmark = pytest.mark.slow

PRESENT = 0.3  # the slow reads are most of each step: a loop that waits for them
# In-memory input: a pull costs indexing and collating, a small share, but on a loaded machine
# (the job's bare twin and other tests beside it on two cores) a pull also waits for the
# pipeline's thread to be scheduled: measured up to 0.12 of a Keras fit's train steps. Absent
# means below XProf's "highly input-bound" line, and no INPUT_BOUND finding (checked below).
ABSENT = 0.2
PHASE_KIND = "phase"


def _needs(member: Member) -> None:
    if member.interpreter:  # its own environment holds them (framework_env checks it)
        return
    missing = [name for name in member.needs if importlib.util.find_spec(name) is None]
    if not missing:
        return
    message = f"{member.name}: {', '.join(missing)} not installed (scripts/setup.sh installs it)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _start(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    cwd.mkdir()
    return subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        out, err = process.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def _results(out: str, prefix: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(prefix)]


_VERSIONS = """
import importlib.metadata as m, json, platform, sys
found = {"python": platform.python_version()}
for name in sys.argv[1:]:
    try:
        found[name] = m.version(name)
    except m.PackageNotFoundError:
        found[name] = "?"
print(json.dumps(found))
"""


def _versions(member: Member) -> dict[str, str]:
    if member.interpreter:  # asked of the interpreter that ran the job
        python = framework_env(member.interpreter)
        out = subprocess.check_output([python, "-c", _VERSIONS, *member.needs], text=True)
        return dict(json.loads(out))
    found = {}
    for name in member.needs:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "?"
    return found


def _first_of_its_kind(index: int) -> bool:
    """The first member to run its script with its interpreter and launcher."""
    kind = (MEMBERS[index].script, MEMBERS[index].interpreter, MEMBERS[index].launcher)
    return all((m.script, m.interpreter, m.launcher) != kind for m in MEMBERS[:index])


@pytest.mark.parametrize(
    "index", range(len(MEMBERS)), ids=[f"{i:02d}-{m.path.stem}" for i, m in enumerate(MEMBERS)]
)
def test_gpuwhy_is_right_on_a_real_world_job(index: int, tmp_path: Path) -> None:
    member = MEMBERS[index]
    _needs(member)
    env = {**os.environ, **member.env}
    python = str(framework_env(member.interpreter)) if member.interpreter else sys.executable
    job = member.command(python)
    report_path = tmp_path / "report.json"
    # Side by side (the machine's two cores): the bare run only gives the job's own results.
    bare_process = _start(job, tmp_path / "bare", env) if _first_of_its_kind(index) else None
    watched = _finish(
        _start(
            [sys.executable, "-m", "gpuwhy", "run", "--json", str(report_path), "--", *job],
            tmp_path / "watched",
            env,
        )
    )
    # The job's own results and exit code, untouched.
    assert watched.returncode == member.exit_code, watched.stderr[-3000:]
    results = _results(watched.stdout, member.results)
    if bare_process is not None:
        bare = _finish(bare_process)
        assert bare.returncode == member.exit_code, bare.stderr[-3000:]
        assert results == _results(bare.stdout, member.results), watched.stdout[-2000:]
    if member.exit_code == 0:
        assert results, watched.stdout[-2000:]
        assert "Traceback" not in watched.stderr, watched.stderr[-3000:]

    report = json.loads(report_path.read_text())
    phases = {
        name: phase for name, phase in report["phases"].items() if phase.get("kind") == PHASE_KIND
    }
    seen = {name: phase["steps"] for name, phase in phases.items()}
    waits = {name: phase["data_wait_fraction"] for name, phase in phases.items()}
    _write_row(member, report, seen, waits)
    assert report["framework"] == member.framework
    assert report["exit_code"] == member.exit_code
    assert seen == dict(member.phases), report["phases"]
    if member.ranks > 1:  # every rank, named by its launcher, ran every step of each phase
        for name, steps in member.phases.items():
            ranks = report["ranks"][name]
            assert sorted(rank["rank"] for rank in ranks) == list(range(member.ranks)), ranks
            assert {rank["steps"] for rank in ranks} == {steps}, ranks
    for name, present in member.waits.items():
        fraction = waits[name]
        if present is None:  # unknown, and the report says why (never a silent blank)
            assert fraction is None, (name, fraction)
            said_why = report.get("not_measured", [])
            assert {"kind": "data_wait_unavailable", "phase": name} in [
                {"kind": spot["kind"], "phase": spot["phase"]} for spot in said_why
            ], said_why
        elif present:
            assert fraction is not None and fraction >= PRESENT, (name, fraction)
        else:
            assert fraction is not None and fraction < ABSENT, (name, fraction)
    # INPUT_BOUND on exactly the phases built to wait. A phase the member says nothing of (a
    # validation of 16 small batches over in-memory arrays) is held to nothing: on the loaded
    # machine its few milliseconds of wait are what the machine made them (0.02-0.06 of a Keras
    # validation on a quiet one, 0.24 beside two other jobs), not a fact of the job.
    said = [f["evidence"] for f in report["findings"] if f["code"] == "INPUT_BOUND"]
    bound = {evidence["phase"] for evidence in said}
    built = {name for name, present in member.waits.items() if present}
    assert bound & set(member.waits) == built, (said, phases)
    # And it says how the batches are made: the pipeline the job built.
    for name, expected in member.inputs.items():
        (evidence,) = [e for e in said if e["phase"] == name]
        described = evidence.get("input", {})
        assert {key: described.get(key) for key in expected} == dict(expected), evidence


def _write_row(
    member: Member,
    report: dict[str, Any],
    steps: dict[str, int],
    waits: dict[str, float | None],
) -> None:
    folder = os.environ.get("GPUWHY_ZOO_RESULTS")
    if not folder:
        return
    row = {
        "index": MEMBERS.index(member),
        "name": member.name,
        "launcher": member.launcher,
        "versions": _versions(member),
        "framework": report["framework"],
        "steps": steps,
        "waits": waits,
        "findings": [finding["code"] for finding in report["findings"]],
        "inputs": {
            finding["evidence"]["phase"]: finding["evidence"]["input_made"]
            for finding in report["findings"]
            if finding["code"] == "INPUT_BOUND" and "input_made" in finding["evidence"]
        },
        "gap": member.gap,
    }
    Path(folder, f"{row['index']:02d}.json").write_text(json.dumps(row, indent=1))
