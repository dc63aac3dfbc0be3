"""Reader side of the block format as columns: blocks decoded without a row object, for the
readers of long recordings (segments.py, tiercolumns.py, spancolumns.py) and row counts from the
blocks' headers. Staging rows and packing races are handled as blockreader.py does (its helpers
are shared here).
"""

from __future__ import annotations

import itertools
import sqlite3
from collections import defaultdict
from collections.abc import Collection, Container, Iterator, Mapping
from operator import itemgetter
from typing import Any, cast

from gpuwhy.recording import codec
from gpuwhy.recording.blockreader import (
    Row,
    _merged_slots,
    _raw_blocks,
    _select_blocks,
    _staged,
    _tier_width,
    _where,
    first_bucket,
    tier_slots,
)
from gpuwhy.recording.streams import SLOT_NS, Column, StreamSpec


def _columns(
    spec: StreamSpec,
    keys: tuple[Any, ...],
    data: bytes,
    skip: Container[str] = (),
) -> list[Column]:
    """The full columns of one block (key columns repeated; fields in `skip` all NULL)."""
    skipped = [i for i, p in enumerate(spec.value_positions) if spec.full[p] in skip]
    values = codec.decode(data, len(spec.value_positions), skipped)
    rows = len(values[0]) if values else 0
    columns: list[Column] = [[] for _ in spec.full]
    for position, column in zip(spec.value_positions, values, strict=True):
        columns[position] = column
    for position, key in zip(spec.key_positions, keys, strict=True):
        columns[position] = [key] * rows
    return columns


def block_columns(
    db: sqlite3.Connection,
    spec: StreamSpec,
    start_ns: int | None = None,
    end_ns: int | None = None,
    keys: Mapping[str, Any] | None = None,
    skip: Container[str] = (),
    *,
    by_end: bool = False,
) -> Iterator[tuple[tuple[Any, ...], list[Column]]]:
    """(key values, full columns) of every block that may hold rows of the range, in slot
    order, open slots' staging rows included as blocks of their own.

    Columnar and unmerged: the rows of a block are in order, but a block may hold rows outside
    the range and a key may have several blocks in a slot (callers cut by time and add up).
    No row objects are made: a slot of 8 GPUs costs one decode per block. Fields named in
    `skip` are not decoded where that saves time (they may come back all NULL). With `by_end`
    (spans), blocks are those whose rows may *reach into* the range: a span that starts before
    `start_ns` and ends inside it is found too.
    """
    keys = keys or {}
    key_positions = spec.key_positions
    order = itemgetter(*range(spec.order))
    # Staging rows are a few slots at most: all of them when rows may start before the range.
    staged = _staged(db, spec, None if by_end else start_ns, end_ns, keys)
    # By first row time, which is indexed (a block's rows lie in its slot), not by slot.
    packed_rows = (
        _blocks_reaching(db, spec, start_ns, end_ns, keys)
        if by_end
        else _raw_blocks(db, spec, start_ns, end_ns, keys)
    )  # (t_first, id, *keys, data)
    blocks = (
        (slot, [row[1:] for row in rows])
        for slot, rows in itertools.groupby(packed_rows, key=lambda row: row[0] // SLOT_NS)
    )
    for _slot, packed, staged_rows in _merged_slots(staged, blocks):
        for block in packed:
            yield tuple(block[1:-1]), _columns(spec, tuple(block[1:-1]), block[-1], skip)
        by_block: dict[int, list[Row]] = defaultdict(list)
        for row in staged_rows:
            by_block[row[0]].append(row[1:])
        for full_rows in by_block.values():
            full_rows.sort(key=order)
            yield (
                tuple(full_rows[0][p] for p in key_positions),
                [list(column) for column in zip(*full_rows, strict=True)],
            )


def row_count(
    db: sqlite3.Connection,
    spec: StreamSpec,
    start_ns: int | None = None,
    end_ns: int | None = None,
    keys: Mapping[str, Any] | None = None,
    *,
    by_end: bool = False,
) -> int:
    """Rows of the blocks that `block_columns` would read (whole blocks: an upper bound on the
    rows of the range) plus the staging rows, from the blocks' row counts: no data is read."""
    keys = keys or {}
    clauses: list[str] = []
    params: list[Any] = []
    if start_ns is not None:
        clauses.append("t_last >= ?" if by_end else "t_first >= ?")
        params.append(start_ns if by_end else start_ns // SLOT_NS * SLOT_NS)
    if end_ns is not None:
        clauses.append("t_first < ?")
        params.append(end_ns)
    where, key_params = _where(spec, None, None, None, keys)
    if where:
        clauses.append(where.removeprefix(" WHERE "))
    sql = (
        f"SELECT SUM(rows) FROM {spec.table('blocks')}"
        f"{' WHERE ' + ' AND '.join(clauses) if clauses else ''}"
    )
    packed = db.execute(sql, [*params, *key_params]).fetchone()[0] or 0
    where, params = _where(spec, None, None, None, keys)
    staged = db.execute(f"SELECT COUNT(*) FROM {spec.table('staging')}{where}", params).fetchone()[
        0
    ]
    return int(packed) + int(staged)


def _blocks_reaching(
    db: sqlite3.Connection,
    spec: StreamSpec,
    start_ns: int | None,
    end_ns: int | None,
    keys: Mapping[str, Any],
) -> Iterator[Row]:
    """(t_first, id, *keys, data) of the blocks with a row starting before `end_ns` and one
    reaching `start_ns` or later (t_last: the latest end), by t_first."""
    clauses: list[str] = []
    params: list[Any] = []
    if end_ns is not None:
        clauses.append("t_first < ?")
        params.append(end_ns)
    if start_ns is not None:
        clauses.append("t_last >= ?")
        params.append(start_ns)
    return _select_blocks(db, spec, clauses, params, keys)


def tier_block_columns(
    db: sqlite3.Connection,
    spec: StreamSpec,
    width_s: int,
    start_ns: int | None = None,
    end_ns: int | None = None,
    keys: Mapping[str, Any] | None = None,
    skip: Collection[int] = (),
) -> Iterator[tuple[tuple[Any, ...], list[Column]]]:
    """(key values, tier columns) of every stored tier block of `width_s` that may hold buckets
    of the range, in slot order, and of the open slots' staging rows (computed). Columns
    are `tier_rows`' row fields after the keys; those at positions in `skip` are not decoded
    (all NULL). Unmerged and unfiltered: callers cut by bucket start and add up."""
    low = first_bucket(start_ns, width_s)
    width = _tier_width(spec)
    for _slot, block_rows, computed in tier_slots(db, spec, width_s, low, end_ns, keys or {}):
        for block in block_rows:
            yield tuple(block[1:-1]), cast(list[Column], codec.decode(block[-1], width, skip))
        yield from computed
