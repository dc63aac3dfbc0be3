"""The four record streams of a recording and how each is laid out in blocks (format 2).

A stream's rows are tuples in the order of its record's fields (the "full" row: time first). Rows
are grouped by `SLOT_NS` of their time and by the stream's key (the GPU, for GPU samples): one
group is one block, stored as columns (codec.py) without the key, which the block row carries.
Rows within a block, and a slot's rows when read back, are ordered by the first `order` fields
of the full row: time, then the key (then a sequence number for spans, which keeps the order in
which spans started at the same nanosecond were written).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, fields
from operator import add

from gpuwhy.model import NS_PER_S, GpuSample, UtilKind

SLOT_S = 60
SLOT_NS = SLOT_S * NS_PER_S
"""Blocks cover one slot of time (aligned to multiples of it on the monotonic clock)."""

BLOCK_ROWS = 1024
"""At most this many rows per block: a slot of a fast stream (100 Hz) spans several blocks, so
a reader holds about a block per key whatever the sampling rate."""

TIER_WIDTHS_S = (1, 60)
"""Downsampled tiers kept for GPU, utilization and host samples: per 1 s and per 1 min."""

# clock-event reason bits counted in tiers (NVML defines bits 0–8, references.md#nvml-clock-events)
REASON_BITS = 16

# Every GPU metric is a field of GpuSample, stored under the same name: the record is the one
# list of them (after its time and device).
GPU_METRICS = tuple(f.name for f in fields(GpuSample))[2:]
HOST_METRICS = (  # the CPU shares stored in tenths of a percent
    "cpu_system_permille",
    "job_cpu_permille",
    "job_rss_bytes",
    "job_processes",
    "memory_available_bytes",
)
UTIL_METRICS = ("gpu_pct", "memory_pct")  # tiers of the driver's buffered samples, by kind

Column = Sequence[int | None]


@dataclass(frozen=True)
class StreamSpec:
    """How one stream's rows map to blocks, staging rows and tiers."""

    name: str
    full: tuple[str, ...]  # the full row's fields, time first
    keys: tuple[str, ...]  # fields constant within a block (stored on the block row)
    order: int  # leading full-row fields that order rows
    tier_metrics: tuple[str, ...] = ()  # no tiers if empty
    # Full columns -> one column per tier metric; those at indices in the second argument may
    # come back all NULL (not asked for).
    tier_columns: Callable[[Sequence[Column], Container[int]], list[Column]] | None = None
    reason_field: str | None = None  # bitmask field whose bits tiers count
    end_of: Callable[[Sequence[Column]], int] | None = None  # latest time a block covers

    @property
    def key_positions(self) -> tuple[int, ...]:
        return tuple(self.full.index(k) for k in self.keys)

    @property
    def value_positions(self) -> tuple[int, ...]:
        """Full-row positions stored in the block's columns (all but the keys)."""
        return tuple(i for i, name in enumerate(self.full) if name not in self.keys)

    @property
    def tiered(self) -> bool:
        return bool(self.tier_metrics)

    def table(self, kind: str) -> str:
        return f"{self.name}_{kind}"


def _util_by_kind(full: Sequence[Column], skip: Container[int] = ()) -> list[Column]:
    """One column per kind: the value where the row is of that kind, else NULL."""
    kinds, values = full[2], full[3]
    columns: list[Column] = []
    for metric, kind in enumerate((int(UtilKind.GPU), int(UtilKind.MEMORY))):
        if metric in skip:
            columns.append([None] * len(kinds))
            continue
        column = list(values)
        # Only the other kind's rows are touched, found at C speed.
        for index in itertools.compress(
            range(len(kinds)), map(operator.ne, kinds, itertools.repeat(kind))
        ):
            column[index] = None
        columns.append(column)
    return columns


def _span_end(full: Sequence[Column]) -> int:
    starts, durations = full[0], full[5]
    return int(max(map(add, starts, durations)))  # never NULL


GPU = StreamSpec(
    name="gpu",
    full=("t_ns", "device", *GPU_METRICS),
    keys=("device",),
    order=2,
    tier_metrics=GPU_METRICS,
    tier_columns=lambda full, skip: list(full[2:]),
    reason_field="clock_event_reasons",
)
UTIL = StreamSpec(
    name="util",
    full=("t_ns", "device", "kind", "value_pct"),
    keys=("device",),
    order=3,
    tier_metrics=UTIL_METRICS,
    tier_columns=_util_by_kind,
)
HOST = StreamSpec(
    name="host",
    full=("t_ns", *HOST_METRICS),
    keys=(),
    order=1,
    tier_metrics=HOST_METRICS,
    tier_columns=lambda full, skip: list(full[1:]),
)
SPAN = StreamSpec(
    name="span",
    full=("start_ns", "seq", "kind", "phase_id", "pid", "duration_ns", "step", "steps"),
    keys=("kind", "phase_id", "pid"),
    order=2,
    end_of=_span_end,
)
STREAMS = (GPU, UTIL, HOST, SPAN)


def ddl(spec: StreamSpec) -> list[str]:
    """CREATE statements of one stream: staging rows, blocks, and tiers where it has them."""
    keys = "".join(f"{k} INTEGER, " for k in spec.keys)
    key_index = "".join(f", {k}" for k in spec.keys)
    full = ", ".join(f"{c} INTEGER" for c in spec.full)
    statements = [
        # Rows of slots still open (committed every flush: what a crash keeps); moved into a
        # block when their slot closes (found by block id: a flood of rows stays linear).
        f"CREATE TABLE {spec.table('staging')} (block INTEGER NOT NULL, {full})",
        f"CREATE INDEX {spec.table('staging')}_by_block ON {spec.table('staging')} (block)",
        # `win` is the block's slot number (t // SLOT_NS), a column name kept from format 2's start.
        f"CREATE TABLE {spec.table('blocks')} (id INTEGER PRIMARY KEY, win INTEGER NOT NULL, "
        f"{keys}t_first INTEGER NOT NULL, t_last INTEGER NOT NULL, rows INTEGER NOT NULL, "
        "data BLOB NOT NULL)",
        # Raw reads go in order of a block's first row; the latest time comes from an index,
        # not a scan of rows whose pages are mostly block data.
        f"CREATE INDEX {spec.table('blocks')}_by_time ON {spec.table('blocks')} (t_first)",
        f"CREATE INDEX {spec.table('blocks')}_by_end ON {spec.table('blocks')} (t_last)",
    ]
    if len(spec.keys) == 1:  # one GPU's blocks in time order, without reading the others'
        statements.append(
            f"CREATE INDEX {spec.table('blocks')}_by_key ON "
            f"{spec.table('blocks')} ({spec.keys[0]}, t_first)"
        )
    if spec.tiered:
        statements += [
            f"CREATE TABLE {spec.table('tiers')} (id INTEGER PRIMARY KEY, block INTEGER NOT NULL, "
            f"width_s INTEGER NOT NULL, win INTEGER NOT NULL, {keys}buckets INTEGER NOT NULL, "
            "data BLOB NOT NULL)",
            f"CREATE INDEX {spec.table('tiers')}_by_win ON {spec.table('tiers')} "
            f"(width_s, win{key_index})",
        ]
    return statements
