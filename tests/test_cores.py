"""The cores a process may use: its affinity, lowered to its container's CPU quota (cgroup v2's
`cpu.max`, else v1's CFS quota and period), on files written as the kernel writes them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuwhy.cores import usable_cores

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux affinity")
AFFINITY = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0


def _v1(folder: Path, quota: str, period: str = "100000") -> Path:
    folder.mkdir(parents=True)
    (folder / "cpu.cfs_quota_us").write_text(quota + "\n")
    (folder / "cpu.cfs_period_us").write_text(period + "\n")
    return folder


def test_no_cgroup_files_leave_the_affinity(tmp_path: Path) -> None:
    assert usable_cores(tmp_path / "cpu.max", [tmp_path / "v1"]) == AFFINITY


def test_a_v2_quota_rounds_up_to_whole_cores(tmp_path: Path) -> None:
    limit = tmp_path / "cpu.max"
    limit.write_text("150000 100000\n")  # one and a half cores' time: two cores' worth, partly
    assert usable_cores(limit, []) == min(AFFINITY, 2)
    limit.write_text("50000 100000\n")
    assert usable_cores(limit, []) == 1
    limit.write_text("max 100000\n")  # no limit
    assert usable_cores(limit, []) == AFFINITY


def test_v1_is_read_where_v2_is_not(tmp_path: Path) -> None:
    limited = _v1(tmp_path / "limited", "100000")
    assert usable_cores(tmp_path / "none", [tmp_path / "missing", limited]) == 1
    unlimited = _v1(tmp_path / "unlimited", "-1")
    assert usable_cores(tmp_path / "none", [unlimited]) == AFFINITY


def test_a_garbled_quota_is_no_quota(tmp_path: Path) -> None:
    limit = tmp_path / "cpu.max"
    limit.write_text("lots\n")
    assert usable_cores(limit, [_v1(tmp_path / "v1", "x", "y")]) == AFFINITY
    limit.write_text("100000 0\n")  # no period: nothing to divide by
    assert usable_cores(limit, []) == AFFINITY
