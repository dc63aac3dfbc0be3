"""Spans as columns, a stored block at a time: what an analysis of a million spans reads.

`Recording.spans()` makes one `Span` object per span (a few µs each: seconds for the million
spans of a long run). Spans are stored in blocks of one kind, one phase and one process per
window (streams.SPAN), so a block's columns are already the arrays an analysis wants: starts,
durations, step numbers, steps covered. Blocks come in window order, open windows' staging rows
as blocks of their own; within a block, spans are in order of their start.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple, cast

from gpuwhy.model import SpanKind
from gpuwhy.recording import blockcolumns
from gpuwhy.recording.streams import SPAN

_KINDS = {int(k): k for k in SpanKind}
_START, _DURATION, _STEP, _STEPS = (
    SPAN.full.index(name) for name in ("start_ns", "duration_ns", "step", "steps")
)


class SpanColumns(NamedTuple):
    """Spans of one kind, phase and process, as parallel columns in order of their start."""

    kind: SpanKind
    phase: str
    pid: int | None
    start_ns: Sequence[int]
    duration_ns: Sequence[int]
    step: Sequence[int | None]
    steps: Sequence[int]


def span_columns(
    db: sqlite3.Connection,
    phases: Mapping[int, str],
    kind: SpanKind | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    *,
    steps: bool = True,
) -> Iterator[SpanColumns]:
    """Every span of the recording (or of one kind), a block of columns at a time; with
    `start_ns`/`end_ns`, only the spans overlapping [start_ns, end_ns) (a span of no length
    counts where it starts). With `steps=False` the step columns are not decoded (all NULL):
    for readers of times only."""
    kind_value = None if kind is None else int(kind)
    keys = {} if kind_value is None else {"kind": kind_value}
    skip = ("seq",) if steps else ("seq", "step", "steps")
    blocks: Iterator[tuple[tuple[Any, ...], Sequence[Sequence[Any]]]] = blockcolumns.block_columns(
        db, SPAN, start_ns, end_ns, keys=keys, skip=skip, by_end=True
    )
    windowed = start_ns is not None or end_ns is not None
    for (kind_key, phase_id, pid), full in blocks:
        if windowed:
            full = _overlapping(full, start_ns, end_ns)
        if not full[_START]:
            continue
        starts, durations, covered = (
            cast(Sequence[int], full[i]) for i in (_START, _DURATION, _STEPS)
        )
        yield SpanColumns(
            _KINDS.get(kind_key) or SpanKind(kind_key),
            phases.get(phase_id, f"phase-{phase_id}"),
            pid,
            starts,
            durations,
            full[_STEP],
            covered,
        )


def _overlapping(
    full: Sequence[Sequence[Any]],
    start_ns: int | None,
    end_ns: int | None,
) -> Sequence[Sequence[Any]]:
    starts, durations = full[_START], full[_DURATION]
    low = -(1 << 63) if start_ns is None else start_ns
    high = 1 << 63 if end_ns is None else end_ns
    keep = [
        low <= s < high or (s < high and s + d > low)
        for s, d in zip(starts, durations, strict=True)
    ]
    if all(keep):
        return full
    return [list(itertools.compress(column, keep)) for column in full]
