"""HostSource and JobTracker on real processes: a busy child shows its CPU, trees are followed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from gpuwhy.model import HostSample
from gpuwhy.telemetry.host import HostSource, busy_fraction
from gpuwhy.telemetry.job import JobTracker

# Burns a fixed amount of CPU time (0.4 s of its own process time) when told to, then idles:
# what the host source measures can be checked against a known amount however loaded the
# machine is (on a busy machine it simply takes longer in wall time).
SPIN = (
    "import sys, time\n"
    "def spin(cpu_s):\n"
    "    end = time.process_time() + cpu_s\n"
    "    while time.process_time() < end: pass\n"
    "print('ready', flush=True); sys.stdin.readline()\n"
    "spin(0.4); print('done', flush=True); time.sleep(60)\n"
)
# A parent that starts the spinning child and waits for it: the job is the whole tree.
TREE = (
    "import subprocess, sys\n"
    f"p = subprocess.Popen([sys.executable, '-c', {SPIN!r}])\n"
    "print(p.pid, flush=True); p.wait()\n"
)
CPU_S = 0.4


@pytest.fixture
def spawn() -> Iterator:
    started: list[subprocess.Popen[str]] = []

    def run(code: str) -> subprocess.Popen[str]:
        child = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        started.append(child)
        return child

    yield run
    for child in started:
        if child.poll() is None:
            for process in psutil.Process(child.pid).children(recursive=True):
                process.kill()
        child.kill()
        child.wait()
        for stream in (child.stdin, child.stdout):
            if stream:
                stream.close()


def _sample(source: HostSource, seconds: float) -> HostSample:
    source.open()
    time.sleep(seconds)
    (sample,) = source.read(time.monotonic_ns())
    assert isinstance(sample, HostSample)
    return sample


def _tree_pid(stdout) -> int:
    """The grandchild's pid from the tree's shared stdout (its "ready" may come first)."""
    lines = {stdout.readline().strip(), stdout.readline().strip()}
    assert "ready" in lines
    return int(next(line for line in lines if line != "ready"))


def _measure_spin(
    source: HostSource,
    stdin,
    stdout,
    *,
    ready: bool = False,
) -> tuple[HostSample, float]:
    """Let the spinner burn CPU_S between two reads; (sample, CPU seconds the sample implies)."""
    if not ready:
        assert stdout.readline().strip() == "ready"
    source.open()
    started = time.monotonic_ns()
    stdin.write("go\n")
    stdin.flush()
    assert stdout.readline().strip() == "done"
    now = time.monotonic_ns()
    (sample,) = source.read(now)
    assert isinstance(sample, HostSample) and sample.job_cpu_pct is not None
    return sample, sample.job_cpu_pct / 100 * (now - started) / 1e9


def test_a_busy_child_shows_the_cpu_time_it_used(spawn) -> None:
    child = spawn(SPIN)
    source = HostSource(JobTracker(child.pid), interval_s=0)
    sample, cpu_s = _measure_spin(source, child.stdin, child.stdout)
    assert CPU_S * 0.9 <= cpu_s <= CPU_S + 0.15, cpu_s  # + pipe handling and the print
    assert sample.job_processes == 1
    assert sample.job_rss_bytes is not None and sample.job_rss_bytes > 1 << 20
    assert sample.cpu_system_pct is not None and 0 < sample.cpu_system_pct <= 100
    assert sample.memory_available_bytes is not None and sample.memory_available_bytes > 0


def test_an_idle_child_shows_almost_no_cpu(spawn) -> None:
    child = spawn("import time; time.sleep(30)")
    time.sleep(0.2)
    sample = _sample(HostSource(JobTracker(child.pid), interval_s=0), 0.5)
    assert sample.job_cpu_pct is not None and sample.job_cpu_pct < 20


def test_the_whole_process_tree_is_the_job(spawn) -> None:
    parent = spawn(TREE)
    grandchild = _tree_pid(parent.stdout)
    tracker = JobTracker(parent.pid)
    assert tracker.pids() == {parent.pid, grandchild}
    # The grandchild inherited the parent's pipes: it reads "go" from the same stdin.
    sample, cpu_s = _measure_spin(
        HostSource(tracker, interval_s=0), parent.stdin, parent.stdout, ready=True
    )
    assert sample.job_processes == 2
    assert CPU_S * 0.9 <= cpu_s <= CPU_S + 0.15, cpu_s  # the grandchild's CPU is the job's


def test_orphans_of_an_exited_root_stay_in_the_job(spawn) -> None:
    parent = spawn(TREE)
    grandchild = _tree_pid(parent.stdout)
    now = [0]
    tracker = JobTracker(parent.pid, refresh_s=1.0, clock=lambda: now[0])
    assert tracker.pids() == {parent.pid, grandchild}
    parent.kill()
    parent.wait()
    now[0] += 2_000_000_000
    try:
        assert tracker.pids() == {grandchild}
    finally:
        psutil.Process(grandchild).kill()


def test_the_tree_is_walked_at_most_every_refresh_interval(spawn) -> None:
    # The parent starts its child only when told, so the tree's change is at a known moment.
    parent = spawn(
        "import subprocess, sys, time\n"
        "sys.stdin.readline()\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(p.pid, flush=True); p.wait()\n"
    )
    now = [0]
    tracker = JobTracker(parent.pid, refresh_s=1.0, clock=lambda: now[0])
    assert tracker.pids() == {parent.pid}
    parent.stdin.write("go\n")
    parent.stdin.flush()
    child = int(parent.stdout.readline())
    now[0] += 999_000_000
    assert tracker.pids() == {parent.pid}  # cached: no scan of the process table
    now[0] += 1_000_000
    assert tracker.pids() == {parent.pid, child}


def test_a_slow_scan_is_repeated_less_often() -> None:
    now = [0]

    def clock() -> int:  # every reading 10 ms later: each scan "takes" 10 ms
        now[0] += 10_000_000
        return now[0]

    tracker = JobTracker(os.getpid(), refresh_s=1.0, clock=clock)
    assert os.getpid() in tracker.pids()
    assert tracker.refresh_interval_ns == 2_000_000_000  # 10 ms is 0.5 % of 2 s
    fast = JobTracker(os.getpid(), refresh_s=1.0, clock=lambda: 0)
    fast.pids()
    assert fast.refresh_interval_ns == 1_000_000_000


def test_no_job_reports_the_system_only() -> None:
    source = HostSource(None, interval_s=0)
    assert source.available()
    sample = _sample(source, 0.1)
    assert sample.job_cpu_pct is None and sample.job_rss_bytes is None
    assert sample.job_processes is None
    assert sample.cpu_system_pct is not None and 0 <= sample.cpu_system_pct <= 100
    assert JobTracker(None).pids() == frozenset()


def test_a_job_whose_root_never_existed_is_empty() -> None:
    free_pid = max(psutil.pids()) + 10_000
    sample = _sample(HostSource(JobTracker(free_pid), interval_s=0), 0.05)
    assert sample.job_processes == 0 and sample.job_rss_bytes == 0


def test_the_host_is_read_at_most_every_interval() -> None:
    now = [10**12]
    source = HostSource(JobTracker(os.getpid()), interval_s=0.5, clock=lambda: now[0])
    source.open()
    assert source.read(now[0] + 100_000_000) == []  # 0.1 s: not due
    (sample,) = source.read(now[0] + 460_000_000)  # due (ticks jitter: 0.9 × interval)
    # This process and whatever children earlier tests in it left (a multiprocessing resource
    # tracker lives as long as its parent).
    family = 1 + len(psutil.Process().children(recursive=True))
    assert sample.job_processes == family and sample.job_cpu_pct is not None
    assert source.read(now[0] + 500_000_000) == []
    assert len(source.read(now[0] + 960_000_000)) == 1


def test_busy_fraction() -> None:
    assert busy_fraction((10.0, 100.0), (15.0, 110.0)) == 0.5
    assert busy_fraction((10.0, 100.0), (10.0, 100.0)) is None  # no time passed
    assert busy_fraction((10.0, 100.0), (30.0, 110.0)) == 1.0  # clamped
