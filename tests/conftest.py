"""The `gpu` marker: GPU tests skip, with the reason, where no NVIDIA GPU answers.

Timing tests that measure again after a miss say so with ``record_property("retried", what the
first attempt missed)``, and a test that failed is run once more (`--reruns 1`, in every pass of
scripts/test.sh); the run's summary lists both, so a retry is seen, never hidden.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _gpu_reason() -> str | None:
    """Why GPU tests cannot run here, or None if an NVIDIA GPU answers."""
    if shutil.which("nvidia-smi") is None:
        return "no NVIDIA driver on this machine (nvidia-smi not found)"
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"nvidia-smi failed: {error}"
    if out.returncode != 0 or "GPU" not in out.stdout:
        return "nvidia-smi lists no GPU"
    return None


LONGEST_FIRST = (
    "tryout/test_try_truth.py",  # two tries against their truth: ~300-440 s of a worker
    "scenarios/test_accuracy.py",
    "tryout/test_try_jobs.py",
)
"""The timing pass's longest files, in that order. scripts/test.sh hands whole files to its two
workers in collection order there (`--dist loadfile --no-loadscope-reorder`): these go first,
the others after them from the most tests to the fewest (xdist's own order), so no long file
starts last while the other worker runs out of work. (The first pass keeps xdist's order: its
two longest, the zoo and the GPU kit's dry run, each run two jobs at once, and side by side
they starved the kit on a loaded machine.)"""


def _longest_first(items: list[pytest.Item]) -> None:
    counts: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::")[0]
        counts[path] = counts.get(path, 0) + 1

    def rank(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::")[0]
        listed = next((i for i, tail in enumerate(LONGEST_FIRST) if path.endswith(tail)), None)
        return (len(LONGEST_FIRST), -counts[path]) if listed is None else (listed, 0)

    items.sort(key=rank)  # stable: a file's tests keep their order


@pytest.hookimpl(trylast=True)  # after `-m` deselected: the files' counts are of what runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _longest_first(items)
    reason = None
    if any(item.get_closest_marker("gpu") for item in items):
        reason = _gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {reason}")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def _session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    shared = os.environ.get("GPUWHY_TEST_CACHE_DIR")  # scripts/test.sh: one for all its passes
    return Path(shared) if shared else tmp_path_factory.mktemp("gpuwhy-cache")


@pytest.fixture(autouse=True)
def _private_cache_dir(_session_cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep gpuwhy's probe cache (and that of every subprocess) out of the user's home, one for
    the whole run of the suite where scripts/test.sh gives one, as a user's is one per machine:
    a cold probe of .venv's three frameworks costs ~10 s of CPU beside a `gpuwhy run` (0.3 s
    warm), niced but on the same two cores as the job and the truth it is timed against, and a
    short job's run waits for it. The timing passes find it warm. The probe's own tests bring
    their own caches."""
    monkeypatch.setenv("GPUWHY_CACHE_DIR", str(_session_cache_dir))


def _interrupt_state() -> tuple[object, bool, str]:
    """How this process takes Ctrl-C: its SIGINT handler, whether SIGINT is blocked, and the
    kernel's own view (`SigIgn`/`SigBlk` in /proc), which also shows what a C library changed
    behind Python's back. Children inherit an ignored or blocked SIGINT: a test that leaves
    either behind makes every later test's `gpuwhy` subprocess in the same worker deaf to
    Ctrl-C."""
    blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return signal.getsignal(signal.SIGINT), blocked, _kernel_interrupt_state()


def _kernel_interrupt_state() -> str:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return "unknown"
    bit = 1 << (signal.SIGINT - 1)
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    return " ".join(
        f"{name}={'yes' if int(fields[name], 16) & bit else 'no'}"
        for name in ("SigIgn", "SigBlk")
        if name in fields
    )


@pytest.fixture(autouse=True)
def _interrupts_left_as_found() -> Iterator[None]:
    before = _interrupt_state()
    yield
    after = _interrupt_state()
    assert after == before, f"the test changed how this process takes Ctrl-C: {before} -> {after}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """List every test that measured again after a miss, with what its first attempt missed."""
    retried = [
        (report.nodeid, value)
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for name, value in getattr(report, "user_properties", ())
        if name == "retried"
    ]
    retried += [  # run again whole (pytest-rerunfailures): the first attempt's error line
        (report.nodeid, _error_line(report)) for report in terminalreporter.stats.get("rerun", ())
    ]
    if not retried:
        return
    terminalreporter.section("measured again after a miss")
    for nodeid, first_miss in retried:
        terminalreporter.write_line(f"{nodeid}: first attempt missed: {first_miss}")


def _error_line(report: pytest.TestReport) -> str:
    lines = [line for line in str(report.longrepr).splitlines() if line.startswith("E ")]
    return lines[0][1:].strip() if lines else "failed"
