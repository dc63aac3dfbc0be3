"""The job's host CPU during each window (phase, "other", the whole run), from stored tiers.

One exact summary per segment of the run between window boundaries (`Recording.host_segments`:
the 1-min tier where no boundary falls, raw samples where one does), credited to the windows the
segment lies in: the same counts and means as testing every host sample against every window,
without reading them one by one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from gpuwhy.analysis.alignment import segment_windows
from gpuwhy.analysis.context import HostStats
from gpuwhy.analysis.intervals import Interval


class _HostSegments(Protocol):
    def host_segments(self, bounds_ns: Sequence[int]) -> Sequence[Any]: ...


def host_window_stats(
    windows: Mapping[str, Iterable[Interval]],
    recording: _HostSegments,
) -> dict[str, HostStats]:
    """window name -> the host samples inside it, summarised; windows without any left out."""
    points, keys = segment_windows(windows)
    sums: dict[str, list[float]] = {name: [0, 0.0, 0, 0.0, 0] for name in windows}
    if len(points) >= 2:
        for names, bucket in zip(keys, recording.host_segments(points), strict=True):
            if not names or bucket is None:
                continue
            job, system = bucket.summary("job_cpu_pct"), bucket.summary("cpu_system_pct")
            for name in names:
                acc = sums[name]
                acc[0] += bucket.samples
                if job is not None:
                    acc[1] += job.total
                    acc[2] += job.n
                if system is not None:
                    acc[3] += system.total
                    acc[4] += system.n
    return {
        name: HostStats(
            samples=int(acc[0]),
            job_cpu_mean_pct=acc[1] / acc[2] if acc[2] else None,
            cpu_system_mean_pct=acc[3] / acc[4] if acc[4] else None,
        )
        for name, acc in sums.items()
        if acc[0]
    }
