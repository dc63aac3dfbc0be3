"""How many CPU cores this process may really use: its affinity, and its container's CPU quota.

A container limited to two CPUs on a 64-core machine sees 64 in `os.cpu_count()` and in its
affinity; the limit is the cgroup's CFS quota (`cpu.max` on cgroup v2, `cpu.cfs_quota_us` over
`cpu.cfs_period_us` on v1: the kernel's CFS bandwidth control, references.md#cfs-bandwidth). The
process gets at most quota / period cores' worth of time, however many it may run on.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

CGROUP_V2_MAX = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1 = (Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup/cpu,cpuacct"))


def usable_cores(v2_max: Path = CGROUP_V2_MAX, v1_dirs: Sequence[Path] = CGROUP_V1) -> int | None:
    """The cores this process may use: its affinity (else the machine's count), lowered to its
    cgroup's CPU quota rounded up; None where the platform tells neither."""
    try:
        cores: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count()
    quota = _quota_cores(v2_max, v1_dirs)
    if quota is not None:
        cores = quota if cores is None else min(cores, quota)
    return cores


def _quota_cores(v2_max: Path, v1_dirs: Sequence[Path]) -> int | None:
    """The cgroup's CPU quota in whole cores (rounded up), or None: no quota, or none readable."""
    try:
        quota, period = v2_max.read_text().split()[:2]
        return _cores_of(quota, period)
    except (OSError, ValueError):
        pass
    for folder in v1_dirs:
        try:
            quota = (folder / "cpu.cfs_quota_us").read_text().strip()
            period = (folder / "cpu.cfs_period_us").read_text().strip()
            return _cores_of(quota, period)
        except (OSError, ValueError):
            continue
    return None


def _cores_of(quota: str, period: str) -> int | None:
    if quota == "max" or int(quota) <= 0 or int(period) <= 0:  # v2 "max", v1 -1: no limit
        return None
    return max(1, math.ceil(int(quota) / int(period)))
