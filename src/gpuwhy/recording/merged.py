"""Several nodes' recordings of one job, read as one recording: `gpuwhy report DIR/`.

Each node's `gpuwhy run` keeps its own recording, in its own machine's monotonic clock. Here
they are put on the first node's clock and read through the interface the analysis reads one
recording by (spans, events, the GPU and host tiers), so a job's report is made by the same
code as a node's.

Clocks. A recording's meta holds the wall time and the monotonic time of its start; their
difference maps its clock to wall time, and so one node's clock to another's, as well as the
machines' wall clocks agree (NTP: milliseconds, or seconds where it is off). Ranks of a
synchronous data-parallel job finish each step together, since the gradient all-reduce ends on
all of them at once; so the wall-clock mapping is then corrected by the median offset between
the nodes' ends of the same training steps, and what remains of those offsets (their spread
about the median) says how well the nodes are aligned. Nodes with no common steps keep the
wall-clock mapping alone, and say so.

Names. Pids are unique only within a machine: node k's pid p reads as p + k × 2²² (above
Linux's largest pid). GPU indices restart at 0 on each node: node k's GPUs follow the previous
nodes' (a job of 2 nodes of 8 GPUs has GPUs 0-15); each device's name says its host.
"""

from __future__ import annotations

import operator
import statistics
from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpuwhy.model import Event, SpanKind
from gpuwhy.recording.reader import Recording
from gpuwhy.recording.spancolumns import SpanColumns
from gpuwhy.recording.tiers import TierBucket

PID_STRIDE = 1 << 22
"""Node k's pids are offset by k × this: Linux pids stay below 2²² (pid_max's largest value)."""
TRAIN = "train"


@dataclass(frozen=True)
class NodeClock:
    """How one node's recording was put on the job's clock (the first node's)."""

    path: str
    host: str | None
    offset_ns: int  # added to the node's times
    wall_offset_ns: int | None  # what the wall clocks alone gave (None: no wall time recorded)
    correction_ns: int  # the median offset of common step ends, taken off the wall mapping
    common_steps: int  # training steps both this node and the first recorded
    residual_ns: int | None  # 95th percentile of |step-end offset - median| (None: no steps)

    def to_data(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "host": self.host,
            "offset_s": self.offset_ns / 1e9,
            "wall_offset_s": None if self.wall_offset_ns is None else self.wall_offset_ns / 1e9,
            "correction_s": self.correction_ns / 1e9,
            "common_steps": self.common_steps,
            "residual_s": None if self.residual_ns is None else self.residual_ns / 1e9,
        }


class MergedRecording:
    """The recordings of a job's nodes as one recording (read-only, on the first one's clock)."""

    def __init__(self, recordings: Sequence[Recording]) -> None:
        if not recordings:
            raise ValueError("no recordings to merge")
        self.nodes = list(recordings)
        self.path = self.nodes[0].path
        self.clocks = _align(self.nodes)
        self._device_base: list[int] = []
        base = 0
        self.devices = []
        for node in self.nodes:
            self._device_base.append(base)
            host = node.meta.get("hostname")
            for info in node.devices:
                name = f"{info.name} @ {host}" if host else info.name
                self.devices.append(replace(info, index=base + info.index, name=name))
            base += max((info.index for info in node.devices), default=-1) + 1
        self.meta = self._meta()

    def _meta(self) -> dict[str, Any]:
        first = dict(self.nodes[0].meta)
        bounds = [self._shifted_bounds(k) for k in range(len(self.nodes))]
        known = [b for b in bounds if b is not None]
        if known:
            first["start_ns"] = min(b[0] for b in known)
            first["end_ns"] = max(b[1] for b in known)
        codes = [node.meta.get("exit_code") for node in self.nodes]
        failed = [code for code in codes if isinstance(code, int) and code != 0]
        first["exit_code"] = failed[0] if failed else codes[0]
        first["hostname"] = ", ".join(
            sorted({str(node.meta.get("hostname")) for node in self.nodes})
        )
        first["nodes"] = [clock.to_data() for clock in self.clocks]
        first["complete"] = all(node.complete for node in self.nodes)
        return first

    def _shifted_bounds(self, k: int) -> tuple[int, int] | None:
        bounds = self.nodes[k].run_bounds()
        if bounds is None:
            return None
        offset = self.clocks[k].offset_ns
        return bounds[0] + offset, bounds[1] + offset

    def parts(self) -> list[tuple[Recording, int, int]]:
        """(node's recording, its clock's offset to the job's in ns, the job's index of its
        GPU 0) per node: a node read apart gives its part of the job's figures."""
        return [
            (node, clock.offset_ns, base)
            for node, clock, base in zip(self.nodes, self.clocks, self._device_base, strict=True)
        ]

    # ---- what the analysis reads -------------------------------------------------------

    @property
    def complete(self) -> bool:
        return bool(self.meta["complete"])

    def run_bounds(self) -> tuple[int, int] | None:
        start, end = self.meta.get("start_ns"), self.meta.get("end_ns")
        if isinstance(start, int) and isinstance(end, int):
            return start, max(start, end)
        return None

    def time_range(self) -> tuple[int, int] | None:
        ranges = []
        for node, clock in zip(self.nodes, self.clocks, strict=True):
            found = node.time_range()
            if found is not None:
                ranges.append((found[0] + clock.offset_ns, found[1] + clock.offset_ns))
        return (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else None

    def time_origin(self) -> int:
        bounds = self.run_bounds()
        return bounds[0] if bounds else 0

    def events(self) -> Iterator[Event]:
        """Every node's events on the job's clock, pids and GPU indices made job-wide."""
        merged: list[Event] = []
        for k, (node, clock) in enumerate(zip(self.nodes, self.clocks, strict=True)):
            for event in node.events():
                data = dict(event.data)
                for key in ("pid", "ppid"):
                    if isinstance(data.get(key), int):
                        data[key] = data[key] + k * PID_STRIDE
                if isinstance(data.get("device"), int):
                    data["device"] = data["device"] + self._device_base[k]
                merged.append(replace(event, t_ns=event.t_ns + clock.offset_ns, data=data))
        merged.sort(key=lambda event: event.t_ns)
        return iter(merged)

    def span_columns(self, kind: SpanKind | None = None, **options: Any) -> Iterator[SpanColumns]:
        for k, (node, clock) in enumerate(zip(self.nodes, self.clocks, strict=True)):
            offset = clock.offset_ns
            for block in node.span_columns(kind, **options):
                yield block._replace(
                    pid=None if block.pid is None else block.pid + k * PID_STRIDE,
                    start_ns=[t + offset for t in block.start_ns],
                )

    def gpu_segments(
        self, bounds_ns: Sequence[int], metrics: Collection[str] | None = None
    ) -> list[dict[int, TierBucket]]:
        return self._segments("gpu_segments", bounds_ns, metrics)

    def util_segments(
        self, bounds_ns: Sequence[int], metrics: Collection[str] | None = None
    ) -> list[dict[int, TierBucket]]:
        return self._segments("util_segments", bounds_ns, metrics)

    def _segments(
        self, read: str, bounds_ns: Sequence[int], metrics: Collection[str] | None
    ) -> list[dict[int, TierBucket]]:
        merged: list[dict[int, TierBucket]] = [{} for _ in range(max(len(bounds_ns) - 1, 0))]
        for k, (node, clock) in enumerate(zip(self.nodes, self.clocks, strict=True)):
            local = [t - clock.offset_ns for t in bounds_ns]
            found_all = getattr(node, read)(local, metrics=metrics)
            for segment, found in zip(merged, found_all, strict=True):
                for device, bucket in found.items():
                    segment[device + self._device_base[k]] = bucket
        return merged

    def host_segments(self, bounds_ns: Sequence[int]) -> list[TierBucket | None]:
        """The nodes' host samples together: a window's job CPU is the nodes' mean."""
        merged: list[TierBucket | None] = [None] * max(len(bounds_ns) - 1, 0)
        for node, clock in zip(self.nodes, self.clocks, strict=True):
            local = [t - clock.offset_ns for t in bounds_ns]
            for i, bucket in enumerate(node.host_segments(local)):
                if bucket is not None:
                    held = merged[i]
                    merged[i] = bucket if held is None else _combined(held, bucket)
        return merged

    def gpu_summary(
        self, start_ns: int | None = None, end_ns: int | None = None
    ) -> dict[int, TierBucket]:
        merged: dict[int, TierBucket] = {}
        for k, (node, clock) in enumerate(zip(self.nodes, self.clocks, strict=True)):
            start = None if start_ns is None else start_ns - clock.offset_ns
            end = None if end_ns is None else end_ns - clock.offset_ns
            for device, bucket in node.gpu_summary(start, end).items():
                merged[device + self._device_base[k]] = bucket
        return merged

    def close(self) -> None:
        for node in self.nodes:
            node.close()

    def __enter__(self) -> MergedRecording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _combined(a: TierBucket, b: TierBucket) -> TierBucket:
    """Two buckets of the same stream as one: counts and sums added, extremes kept."""
    values = list(a.values)
    metric_end = len(values) - a.bits
    for slot in range(0, metric_end, 4):
        values[slot] = (a.values[slot] or 0) + (b.values[slot] or 0)
        values[slot + 1] = (a.values[slot + 1] or 0) + (b.values[slot + 1] or 0)
        lows = [v for v in (a.values[slot + 2], b.values[slot + 2]) if v is not None]
        highs = [v for v in (a.values[slot + 3], b.values[slot + 3]) if v is not None]
        values[slot + 2] = min(lows) if lows else None
        values[slot + 3] = max(highs) if highs else None
    for slot in range(metric_end, len(values)):
        values[slot] = (a.values[slot] or 0) + (b.values[slot] or 0)
    return replace(a, samples=a.samples + b.samples, values=tuple(values))


def _align(nodes: Sequence[Recording]) -> list[NodeClock]:
    first_wall = _wall_offset(nodes[0])
    first_ends = _train_step_ends(nodes[0])
    clocks = []
    for node in nodes:
        wall = _wall_offset(node)
        # wall = t + its offset on every node: t on the first node's clock = t + (wall - first)
        mapped = 0 if wall is None or first_wall is None else wall - first_wall
        ends = _train_step_ends(node)
        gaps = [ends[step] + mapped - first_ends[step] for step in ends.keys() & first_ends.keys()]
        correction = int(statistics.median(gaps)) if gaps else 0
        residual = None
        if gaps:
            spread = sorted(abs(gap - correction) for gap in gaps)
            residual = spread[min(len(spread) - 1, int(0.95 * len(spread)))]
        clocks.append(
            NodeClock(
                path=str(node.path),
                host=node.meta.get("hostname"),
                offset_ns=mapped - correction,
                wall_offset_ns=None if wall is None or first_wall is None else mapped,
                correction_ns=correction,
                common_steps=len(gaps),
                residual_ns=residual,
            )
        )
    return clocks


def _wall_offset(node: Recording) -> int | None:
    """Monotonic to wall-clock ns for this recording, from the times of its start."""
    wall, start = node.meta.get("start_wall_s"), node.meta.get("start_ns")
    if isinstance(wall, int | float) and isinstance(start, int):
        return round(wall * 1e9) - start
    return None


def _train_step_ends(node: Recording) -> dict[int, int]:
    """The n-th training step's end, as the median over the node's ranks (ranks in lockstep
    run the same steps: the n-th of one is the n-th of all, on every node)."""
    per_rank: dict[int | None, list[int]] = defaultdict(list)
    for block in node.span_columns(SpanKind.STEP):
        if block.phase == TRAIN:
            per_rank[block.pid].extend(map(operator.add, block.start_ns, block.duration_ns))
    by_ordinal: dict[int, list[int]] = defaultdict(list)
    for ends in per_rank.values():
        for ordinal, end in enumerate(sorted(ends)):
            by_ordinal[ordinal].append(end)
    return {ordinal: int(statistics.median(ends)) for ordinal, ends in by_ordinal.items()}
