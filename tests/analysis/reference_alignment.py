"""The streaming alignment, sample by sample: the oracle that `align_summaries` (stored tiers
and raw edges) is checked against. Kept in the tests, as reference_phases.py is: the package
computes the same statistics from the recording's summaries alone."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from operator import attrgetter

from gpuwhy.analysis.alignment import (
    _N_MEANS,
    _READ_FIELDS,
    GpuWindowStats,
    _Acc,
    _Segments,
)
from gpuwhy.analysis.intervals import Interval, IntervalSet
from gpuwhy.model import GpuSample, UtilKind, UtilSample

_read = attrgetter(*_READ_FIELDS)


class _SampleAcc(_Acc):
    def add(self, sample: GpuSample) -> None:
        values = _read(sample)
        self.samples += 1
        counts, totals = self.counts, self.totals
        for i in range(_N_MEANS):
            value = values[i]
            if value is not None:
                counts[i] += 1
                totals[i] += value
        memory, job_memory, reasons = values[_N_MEANS:]
        if memory is not None and (self.memory_max is None or memory > self.memory_max):
            self.memory_max = memory
        if job_memory is not None and (
            self.job_memory_max is None or job_memory > self.job_memory_max
        ):
            self.job_memory_max = job_memory
        if reasons is not None:
            self.reason_samples += 1
            bit = 1
            while bit <= reasons:
                if reasons & bit:
                    self.reasons[bit] += 1
                bit <<= 1


class _Walk(_Segments):
    def key(self, t_ns: int) -> tuple[str, ...]:
        points = self.points
        if not points or t_ns < points[0] or t_ns >= points[-1]:
            return ()
        if t_ns < points[self._index]:  # out of order: start over (rare)
            self._index = bisect.bisect_right(points, t_ns) - 1
        while t_ns >= points[self._index + 1]:
            self._index += 1
        return self.keys[self._index]


def align(
    windows: Mapping[str, Iterable[Interval]],
    gpu_samples: Iterable[GpuSample],
    util_samples: Iterable[UtilSample] = (),
) -> dict[str, dict[int, GpuWindowStats]]:
    """window name -> device -> stats; a device absent from a window had no sample in it."""
    sets = {name: IntervalSet(intervals) for name, intervals in windows.items()}
    accs: dict[tuple[tuple[str, ...], int], _SampleAcc] = {}

    segments = _Walk(sets)
    for sample in gpu_samples:
        slot = (segments.key(sample.t_ns), sample.device)
        acc = accs.get(slot)
        if acc is None:
            acc = accs[slot] = _SampleAcc()
        acc.add(sample)
    segments = _Walk(sets)
    for util in util_samples:
        if util.kind is not UtilKind.GPU:
            continue
        slot = (segments.key(util.t_ns), util.device)
        acc = accs.get(slot)
        if acc is None:
            acc = accs[slot] = _SampleAcc()
        acc.buffered_n += 1
        acc.buffered_total += util.value_pct

    merged: dict[tuple[str, int], _Acc] = {}
    for (names, device), acc in accs.items():
        for name in names:
            target = merged.get((name, device))
            if target is None:
                target = merged[(name, device)] = _SampleAcc()
            target.merge(acc)
    result: dict[str, dict[int, GpuWindowStats]] = {name: {} for name in windows}
    for (name, device), acc in sorted(merged.items()):
        result[name][device] = acc.stats(device)
    return result
