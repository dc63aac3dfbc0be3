"""Reader side of the streams of format 2: rows and tiers, in time order.

A read takes the open slots' staging rows first and then streams the packed blocks of the
range (one index range scan, in order of each block's first row for raw rows, slot by slot
for tiers). Staging rows whose slot was packed between the two queries are recognised by
their block id and skipped in favour of the block: a reader racing the writer never sees rows
twice or loses them. Memory is the rows of the blocks that overlap in time (a block per GPU),
however long the run and whatever the sampling rate.
"""

from __future__ import annotations

import bisect
import itertools
import sqlite3
from collections import defaultdict
from collections.abc import Container, Iterator, Mapping
from operator import itemgetter
from typing import Any

from gpuwhy.model import NS_PER_S
from gpuwhy.recording import codec
from gpuwhy.recording.streams import SLOT_NS, Column, StreamSpec
from gpuwhy.recording.tiers import bucket_columns

Row = tuple[Any, ...]


def _where(
    spec: StreamSpec,
    time: str | None,
    start_ns: int | None,
    end_ns: int | None,
    keys: Mapping[str, Any],
) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if time is not None and start_ns is not None:
        clauses.append(f"{time} >= ?")
        params.append(start_ns)
    if time is not None and end_ns is not None:
        clauses.append(f"{time} < ?")
        params.append(end_ns)
    for name, value in keys.items():
        clauses.append(f"{name} IS ?")
        params.append(value)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _slot_range(start_ns: int | None, end_ns: int | None) -> tuple[str, list[Any]]:
    clauses, params = [], []
    if start_ns is not None:
        clauses.append("win >= ?")
        params.append(start_ns // SLOT_NS)
    if end_ns is not None:
        clauses.append("win <= ?")
        params.append((end_ns - 1) // SLOT_NS)
    return " AND ".join(clauses), params


def _staged(
    db: sqlite3.Connection,
    spec: StreamSpec,
    start_ns: int | None,
    end_ns: int | None,
    keys: Mapping[str, Any],
) -> dict[int, list[Row]]:
    """Staging rows (block id first) by slot."""
    where, params = _where(spec, spec.full[0], start_ns, end_ns, keys)
    sql = f"SELECT block, {', '.join(spec.full)} FROM {spec.table('staging')}{where}"
    by_slot: dict[int, list[Row]] = defaultdict(list)
    for row in db.execute(sql, params):
        by_slot[row[1] // SLOT_NS].append(row)
    return by_slot


def _blocks(
    db: sqlite3.Connection,
    spec: StreamSpec,
    table: str,
    start_ns: int | None,
    end_ns: int | None,
    keys: Mapping[str, Any],
    extra: str = "",
    extra_params: tuple[Any, ...] = (),
) -> Iterator[tuple[int, list[Row]]]:
    """(slot, [(block id, *keys, data)...]) in slot order."""
    slot_sql, params = _slot_range(start_ns, end_ns)
    where, key_params = _where(spec, None, None, None, keys)
    clauses = [c for c in (extra, slot_sql, where.removeprefix(" WHERE ")) if c]
    sql = (
        f"SELECT win, {'block' if table.endswith('tiers') else 'id'}, "
        f"{''.join(k + ', ' for k in spec.keys)}data FROM {table}"
        f"{' WHERE ' + ' AND '.join(clauses) if clauses else ''} ORDER BY win"
    )
    cursor = db.execute(sql, [*extra_params, *params, *key_params])
    for slot, rows in itertools.groupby(cursor, key=itemgetter(0)):
        yield slot, [row[1:] for row in rows]


def _merged_slots(
    staged: dict[int, list[Row]],
    blocks: Iterator[tuple[int, list[Row]]],
) -> Iterator[tuple[int, list[Row], list[Row]]]:
    """(slot, blocks, staging rows not packed into those blocks) in slot order."""
    pending = sorted(staged)
    position = 0
    for slot, block_rows in blocks:
        while position < len(pending) and pending[position] < slot:
            yield pending[position], [], staged[pending[position]]
            position += 1
        rows = staged.get(slot, [])
        if rows:
            position += 1
            packed = {row[0] for row in block_rows}
            rows = [row for row in rows if row[0] not in packed]
        yield slot, block_rows, rows
    for slot in pending[position:]:
        yield slot, [], staged[slot]


def _expand(spec: StreamSpec, keys: tuple[Any, ...], data: bytes) -> list[Row]:
    """The full rows of one block."""
    values = codec.decode(data, len(spec.value_positions))
    rows = len(values[0]) if values else 0
    columns: list[Any] = [None] * len(spec.full)
    for position, column in zip(spec.value_positions, values, strict=True):
        columns[position] = column
    for position, key in zip(spec.key_positions, keys, strict=True):
        columns[position] = itertools.repeat(key, rows)
    return list(zip(*columns, strict=True))


def _raw_blocks(
    db: sqlite3.Connection,
    spec: StreamSpec,
    start_ns: int | None,
    end_ns: int | None,
    keys: Mapping[str, Any],
) -> Iterator[Row]:
    """(t_first, id, *keys, data) of the blocks that may hold rows of the range, by t_first."""
    clauses: list[str] = []
    params: list[Any] = []
    if start_ns is not None:  # a block holds rows of one slot: none starts before it
        clauses.append("t_first >= ?")
        params.append(start_ns // SLOT_NS * SLOT_NS)
    if end_ns is not None:
        clauses.append("t_first < ?")
        params.append(end_ns)
    return _select_blocks(db, spec, clauses, params, keys)


def _select_blocks(
    db: sqlite3.Connection,
    spec: StreamSpec,
    clauses: list[str],
    params: list[Any],
    keys: Mapping[str, Any],
) -> Iterator[Row]:
    """(t_first, id, *keys, data) of the blocks meeting `clauses` and the key values, by
    t_first."""
    where, key_params = _where(spec, None, None, None, keys)
    if where:
        clauses = [*clauses, where.removeprefix(" WHERE ")]
    sql = (
        f"SELECT t_first, id, {''.join(k + ', ' for k in spec.keys)}data "
        f"FROM {spec.table('blocks')}{' WHERE ' + ' AND '.join(clauses) if clauses else ''} "
        "ORDER BY t_first, id"
    )
    # Not `yield from`: a reader dropped after its recording was closed (an interrupted report)
    # would close the cursor then, on a closed database, and Python print the error.
    for row in db.execute(sql, [*params, *key_params]):  # noqa: UP028
        yield row


def rows(
    db: sqlite3.Connection,
    spec: StreamSpec,
    start_ns: int | None = None,
    end_ns: int | None = None,
    keys: Mapping[str, Any] | None = None,
) -> Iterator[Row]:
    """Full rows with start_ns <= time < end_ns (and the given key values), in order.

    Blocks come in order of their first row; rows earlier than the next block's first row are
    final and go out, the rest wait to be merged with it. What is held is the rows of the
    blocks that overlap in time (one block of each GPU, at most BLOCK_ROWS rows each).
    """
    keys = keys or {}
    order = itemgetter(*range(spec.order))
    time_of = itemgetter(0)
    # Staging rows, read first, as blocks of their own (see the module doc on packing races).
    staged: list[tuple[int, int, list[Row]]] = []
    for slot_rows in _staged(db, spec, start_ns, end_ns, keys).values():
        by_block: dict[int, list[Row]] = defaultdict(list)
        for row in slot_rows:
            by_block[row[0]].append(row[1:])
        for block, block_rows in by_block.items():
            block_rows.sort(key=order)
            staged.append((block_rows[0][0], block, block_rows))
    staged.sort(key=itemgetter(0, 1), reverse=True)  # popped from the end, earliest first
    seen: set[int] = set()
    pending: list[Row] = []  # sorted, held back: a later block may hold rows before them
    fresh: list[Row] = []  # rows of blocks since the last sort, not yet sorted together
    earliest = None  # the earliest time among pending and fresh rows

    def arrive(first: int, block_rows: list[Row]) -> Iterator[Row]:
        # Sort only when some held rows became final: once per slot in the usual case of
        # one block per GPU per slot, rather than once per block.
        nonlocal pending, fresh, earliest
        if earliest is not None and earliest < first:
            pending += fresh
            pending.sort(key=order)  # sorted runs: timsort merges them in linear time
            fresh = []
            cut = bisect.bisect_left(pending, first, key=time_of)
            yield from _trimmed(pending[:cut], start_ns, end_ns)
            pending = pending[cut:]
            earliest = pending[0][0] if pending else None
        fresh += block_rows
        if block_rows and (earliest is None or block_rows[0][0] < earliest):
            earliest = block_rows[0][0]

    for packed in _raw_blocks(db, spec, start_ns, end_ns, keys):
        while staged and staged[-1][0] < packed[0]:
            first, block_id, block_rows = staged.pop()
            if block_id not in seen:
                yield from arrive(first, block_rows)
        seen.add(packed[1])
        yield from arrive(packed[0], _expand(spec, packed[2:-1], packed[-1]))
    for first, block_id, block_rows in reversed(staged):
        if block_id not in seen:
            yield from arrive(first, block_rows)
    pending += fresh
    pending.sort(key=order)
    yield from _trimmed(pending, start_ns, end_ns)


def _trimmed(out: list[Row], start_ns: int | None, end_ns: int | None) -> list[Row]:
    if start_ns is not None and out and out[0][0] < start_ns:
        out = [row for row in out if row[0] >= start_ns]
    if end_ns is not None and out and out[-1][0] >= end_ns:
        out = [row for row in out if row[0] < end_ns]
    return out


def tier_rows(
    db: sqlite3.Connection,
    spec: StreamSpec,
    width_s: int,
    start_ns: int | None = None,
    end_ns: int | None = None,
    keys: Mapping[str, Any] | None = None,
    skip_slots: Container[int] = (),
) -> Iterator[Row]:
    """Stored tier rows of `width_s` (one stored width) whose bucket starts in the range, in
    slot order (not merged: late blocks give a second row for a bucket; see tiers.merge_rows).
    Slots (numbers) in `skip_slots` are left out without being decoded.
    """
    low = first_bucket(start_ns, width_s)
    key_count = len(spec.key_positions)
    width = _tier_width(spec)
    for _slot, block_rows, computed in tier_slots(
        db, spec, width_s, low, end_ns, keys or {}, skip_slots
    ):
        out: list[Row] = []
        for block in block_rows:
            columns = codec.decode(block[-1], width)
            out += [(row[0], *block[1:-1], *row[1:]) for row in zip(*columns, strict=True)]
        for key, staged_columns in computed:
            out += [(row[0], *key, *row[1:]) for row in zip(*staged_columns, strict=True)]
        out.sort(key=itemgetter(*range(1 + key_count)))
        yield from (
            row
            for row in out
            if (low is None or row[0] >= low) and (end_ns is None or row[0] < end_ns)
        )


def first_bucket(start_ns: int | None, width_s: int) -> int | None:
    """The start of the first bucket of `width_s` that begins at or after `start_ns`."""
    width_ns = width_s * NS_PER_S
    return None if start_ns is None else -(-start_ns // width_ns) * width_ns


def tier_slots(
    db: sqlite3.Connection,
    spec: StreamSpec,
    width_s: int,
    low: int | None,
    end_ns: int | None,
    keys: Mapping[str, Any],
    skip_slots: Container[int] = (),
) -> Iterator[tuple[int, list[Row], list[tuple[tuple[Any, ...], list[Column]]]]]:
    """Per slot, in order: (slot, its stored tier blocks of `width_s` that may hold buckets
    from `low` to `end_ns`, the tier columns computed from its staging rows: one (key values,
    columns) per key). Slots in `skip_slots` are passed over, nothing of them computed.
    """
    width_ns = width_s * NS_PER_S
    # Whole slots of staging rows, so that no bucket is computed from part of its rows.
    staged = _staged(
        db,
        spec,
        None if low is None else low - low % SLOT_NS,
        None if end_ns is None else -(-end_ns // SLOT_NS) * SLOT_NS,
        keys,
    )
    blocks = _blocks(db, spec, spec.table("tiers"), low, end_ns, keys, "width_s = ?", (width_s,))
    key_positions = spec.key_positions
    for slot, block_rows, staged_rows in _merged_slots(staged, blocks):
        if slot in skip_slots:
            continue
        by_block: dict[int, list[Row]] = defaultdict(list)
        for row in staged_rows:
            by_block[row[0]].append(row[1:])
        computed = []
        for full_rows in by_block.values():
            full_rows.sort(key=itemgetter(*range(spec.order)))
            columns = bucket_columns(spec, list(zip(*full_rows, strict=True)), width_ns)
            computed.append((tuple(full_rows[0][p] for p in key_positions), columns))
        yield slot, block_rows, computed


def _tier_width(spec: StreamSpec) -> int:
    from gpuwhy.recording.streams import REASON_BITS

    return 2 + 4 * len(spec.tier_metrics) + (REASON_BITS if spec.reason_field else 0)


def time_bounds(db: sqlite3.Connection, spec: StreamSpec) -> tuple[int | None, int | None]:
    """(earliest, latest) time of the stream; spans end at start + duration."""
    end = "start_ns + duration_ns" if spec.end_of else spec.full[0]
    staged = db.execute(
        f"SELECT MIN({spec.full[0]}), MAX({end}) FROM {spec.table('staging')}"
    ).fetchone()
    table = spec.table("blocks")  # one aggregate per query: each is an index lookup
    packed = (
        db.execute(f"SELECT MIN(t_first) FROM {table}").fetchone()[0],
        db.execute(f"SELECT MAX(t_last) FROM {table}").fetchone()[0],
    )
    lows = [v for v in (staged[0], packed[0]) if v is not None]
    highs = [v for v in (staged[1], packed[1]) if v is not None]
    return (min(lows) if lows else None), (max(highs) if highs else None)
