"""The start-up hook in real child interpreters, the way `gpuwhy run` starts a job."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hookspans import step_waits

BOOT = Path(__file__).resolve().parents[2] / "src" / "gpuwhy" / "hooks" / "boot"
REPO_PYTHON = sys.executable

USER_SITECUSTOMIZE = """
import os
os.environ["USER_SITECUSTOMIZE_RAN"] = "yes"
"""

PROBE = """
import json, os, sys
finders = [type(f).__name__ for f in sys.meta_path]
before = "gpuwhy" in sys.modules
result = {"user": os.environ.get("USER_SITECUSTOMIZE_RAN"), "finders": finders,
          "gpuwhy_before_frameworks": before,
          "sitecustomize": getattr(sys.modules.get("sitecustomize"), "__file__", None)}
if len(sys.argv) > 1:
    import torch  # a watched framework: the hooks load now, and patch it
    from torch.utils.data import DataLoader
    for _ in DataLoader(list(range(6)), batch_size=2):
        pass
    from gpuwhy.hooks import emitter
    emitter.flush(2.0)
    result["gpuwhy_file"] = sys.modules["gpuwhy"].__file__
    result["patched"] = type(DataLoader.__iter__).__name__
    result["finders_after"] = [type(f).__name__ for f in sys.meta_path]
print(json.dumps(result))
"""


def run_child(
    tmp_path: Path,
    *,
    env_extra: dict[str, str],
    python: str = REPO_PYTHON,
    args: tuple[str, ...] = (),
) -> dict[str, object]:
    user_dir = tmp_path / "user"
    user_dir.mkdir(exist_ok=True)
    (user_dir / "sitecustomize.py").write_text(USER_SITECUSTOMIZE)
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWHY")}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(BOOT), str(user_dir)]),
            "TF_CPP_MIN_LOG_LEVEL": "3",
            **env_extra,
        }
    )
    done = subprocess.run(
        [python, str(script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_the_users_sitecustomize_still_runs_and_nothing_loads_early(tmp_path: Path) -> None:
    out = run_child(tmp_path, env_extra={"GPUWHY_SOCKET": str(tmp_path / "none.sock")})
    assert out["user"] == "yes"
    assert str(out["sitecustomize"]).startswith(str(tmp_path / "user"))
    assert "_BootFinder" in out["finders"]  # type: ignore[operator]
    assert out["gpuwhy_before_frameworks"] is False  # nothing of gpuwhy, no framework, yet


def test_gpuwhy_boot_0_installs_nothing(tmp_path: Path) -> None:
    out = run_child(
        tmp_path, env_extra={"GPUWHY_SOCKET": str(tmp_path / "none.sock"), "GPUWHY_BOOT": "0"}
    )
    assert out["user"] == "yes"
    assert "_BootFinder" not in out["finders"]  # type: ignore[operator]


def test_without_a_socket_the_boot_does_nothing(tmp_path: Path) -> None:
    out = run_child(tmp_path, env_extra={})
    assert out["user"] == "yes" and "_BootFinder" not in out["finders"]  # type: ignore[operator]


@pytest.mark.slow
def test_a_watched_import_loads_this_gpuwhy_and_patches(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = run_child(
        tmp_path, env_extra={"GPUWHY_SOCKET": str(tmp_path / "none.sock")}, args=("torch",)
    )
    assert out["gpuwhy_file"] == str(BOOT.parents[1] / "__init__.py")
    assert "PostImportFinder" in out["finders_after"]  # type: ignore[operator]
    assert "_BootFinder" not in out["finders_after"]  # type: ignore[operator]


def test_a_job_interpreter_without_gpuwhy_still_boots(tmp_path: Path) -> None:
    from support import framework_env

    bare = framework_env("bare")  # a venv with nothing installed: no gpuwhy either
    out = run_child(
        tmp_path, env_extra={"GPUWHY_SOCKET": str(tmp_path / "none.sock")}, python=str(bare)
    )
    assert out["user"] == "yes" and "_BootFinder" in out["finders"]  # type: ignore[operator]


@pytest.mark.timing  # milliseconds: under the parallel lane's load one import took 6.8
def test_boot_costs_a_few_milliseconds_at_most(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWHY")}
    env.update({"PYTHONPATH": str(BOOT), "GPUWHY_SOCKET": str(tmp_path / "none.sock")})
    timings = []
    for _ in range(3):  # the first, in a fresh checkout, also compiles the module
        done = subprocess.run(
            [REPO_PYTHON, "-X", "importtime", "-c", "pass"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        lines = [
            line for line in done.stderr.splitlines() if line.rstrip().endswith("sitecustomize")
        ]
        assert lines, done.stderr[-2000:]
        timings.append(int(lines[-1].split("|")[1]))
    # All of it: the module, and looking for the user's sitecustomize along sys.path (a scan
    # Python itself would make when there were none of ours; its directory listings are cached
    # for the job's own imports). About 3 ms on the 2-core CI machine.
    assert min(timings) < 5000, timings


TORCH_JOB = """
import torch
from torch.utils.data import DataLoader
for epoch in range(2):
    for batch in DataLoader(list(range(8)), batch_size=2):
        pass
"""


@pytest.mark.slow
def test_a_job_in_another_venv_sends_its_spans_to_the_socket(tmp_path: Path) -> None:
    from hookspans import LineServer

    from gpuwhy.model import Span, SpanKind
    from support import framework_env

    python = framework_env("torch-cpu")  # torch, and no gpuwhy installed
    server = LineServer()
    script = tmp_path / "job.py"
    script.write_text(TORCH_JOB)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWHY")}
    env.update({"PYTHONPATH": str(BOOT), "GPUWHY_SOCKET": server.path})
    try:
        done = subprocess.run(
            [str(python), str(script)], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        records = server.wait_for(10)
    finally:
        server.close()
    steps = [r for r in records if isinstance(r, Span) and r.kind is SpanKind.STEP]
    waits = [r for r in records if isinstance(r, Span) and r.kind is SpanKind.WAIT]
    assert len(steps) == len(step_waits(waits)) == 8
    assert {s.phase for s in steps} == {"train"}


def test_the_start_up_hook_watches_every_module_the_hooks_patch() -> None:
    import ast

    from gpuwhy.hooks import auto

    source = (BOOT / "sitecustomize.py").read_text()
    assignment = next(
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "_WATCHED"
    )
    watched = {
        element.value for element in ast.walk(assignment) if isinstance(element, ast.Constant)
    }
    assert watched == {module for modules in auto.FRAMEWORKS.values() for module in modules}


def _python_older_than_supported() -> str | None:
    """A Python before 3.10 that runs on this machine (pyenv's, or on PATH), if any."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"), "versions")
    candidates = [str(p) for p in sorted(pyenv.glob("3.[789].*/bin/python"), reverse=True)]
    candidates += [p for v in ("3.9", "3.8") if (p := shutil.which(f"python{v}"))]
    for python in candidates:
        probe = "import sys; assert (3, 7) <= sys.version_info < (3, 10)"
        if subprocess.run([python, "-c", probe], capture_output=True).returncode == 0:
            return python
    return None


@pytest.mark.slow
def test_a_job_whose_hooks_cannot_load_is_reported_as_not_seen(tmp_path: Path) -> None:
    """A job on a Python gpuwhy does not support imports a framework: its hooks stay out, the
    job runs as written, and the report says that its phases and steps are missing (a report
    of "no problem" would be wrong), in the terminal, the verdict and the JSON."""
    import jsonschema

    from gpuwhy.report import json_report

    old = _python_older_than_supported()
    if old is None:
        pytest.skip("no Python before 3.10 on this machine")
    job = tmp_path / "job"
    job.mkdir()
    (job / "jax.py").write_text("LOADED = True\n")  # what the boot watches for: `jax`
    (job / "train.py").write_text("import sys\nimport jax\nprint('trained', jax.LOADED)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWHY")}
    env["PYTHONPATH"] = str(BOOT.parents[2])  # gpuwhy itself, for the `gpuwhy run` process
    command = ["run", "--json", "report.json", "--", old, str(job / "train.py")]
    done = subprocess.run(
        [REPO_PYTHON, "-m", "gpuwhy", *command],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "trained True" in done.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    jsonschema.validate(report, json_report.schema())
    [spot] = report["not_measured"]
    assert spot["kind"] == "hooks_unavailable"
    assert "need Python 3.10 or later" in spot["reason"]
    assert "not seen inside" in report["verdict"] and "no runtime problem" not in report["verdict"]
    shown = " ".join((done.stdout + done.stderr).split())
    assert "Not measured: gpuwhy's hooks did not load" in shown
