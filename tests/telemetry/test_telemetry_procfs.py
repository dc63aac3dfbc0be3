"""The /proc readers agree with psutil on real processes, including awkward command names."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpuwhy.telemetry import procfs

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def test_own_process_matches_psutil() -> None:
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:  # some CPU time to compare
        pass
    me = psutil.Process()
    start, cpu_s, rss = procfs.process_stat(os.getpid())
    times = me.cpu_times()
    assert cpu_s == pytest.approx(times.user + times.system, abs=0.05)
    assert rss == pytest.approx(me.memory_info().rss, rel=0.05)
    assert start > 0


def test_a_command_name_with_spaces_and_parentheses(tmp_path: Path) -> None:
    odd = tmp_path / "we ird) (x"
    odd.symlink_to(sys.executable)
    child = subprocess.Popen([str(odd), "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)
        stat = procfs.process_stat(child.pid)
        assert stat is not None
        assert stat[2] == pytest.approx(psutil.Process(child.pid).memory_info().rss, rel=0.05)
    finally:
        child.kill()
        child.wait()


def test_a_gone_process_is_none() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert procfs.process_stat(child.pid) is None


def test_system_counters_match_psutil() -> None:
    busy, total = procfs.system_times()
    times = psutil.cpu_times()
    assert total == pytest.approx(sum(times) - times.guest - times.guest_nice, rel=0.01)
    assert busy == pytest.approx(total - times.idle - times.iowait, rel=0.05, abs=1.0)
    available = procfs.memory_available()
    assert available == pytest.approx(psutil.virtual_memory().available, rel=0.05)
