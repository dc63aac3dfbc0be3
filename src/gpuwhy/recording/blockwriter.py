"""Writer side of one stream: open slots in staging rows, closed slots as blocks and tiers.

Every flush commits the rows put since the last one as plain staging rows (cheap: one
executemany, as in format 1), so a crash loses at most a flush interval. A slot closes once the
stream has moved two slots past it (late rows, such as a wait span reported after the step
that follows it, still find their slot open); closing encodes its rows into one block, computes
its tiers and deletes its staging rows, all in the flush's transaction, so a reader sees a slot
either as staging rows or as a block, never both or neither. Memory: the rows of the open slots
(about two slots of each key: ~1 MB for 8 GPUs at 10 Hz).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from gpuwhy.model import NS_PER_S
from gpuwhy.recording import codec
from gpuwhy.recording.streams import BLOCK_ROWS, SLOT_NS, TIER_WIDTHS_S, Column, StreamSpec
from gpuwhy.recording.tiers import bucket_columns

_OPEN_SLOTS = 2  # slots kept open behind the newest one seen in the stream


class _Slot:
    __slots__ = ("block", "rows")

    def __init__(self, block: int) -> None:
        self.block = block
        self.rows: list[tuple[Any, ...]] = []


class StreamWriter:
    """Buffers, stages and packs the rows of one stream (used by the writer thread only)."""

    def __init__(self, db: sqlite3.Connection, spec: StreamSpec) -> None:
        self.db = db
        self.spec = spec
        self._key_of = itemgetter(*spec.key_positions) if spec.keys else None
        self._order = itemgetter(*range(spec.order))
        self._open: dict[tuple[Any, int], _Slot] = {}
        self._full: list[tuple[tuple[Any, int], _Slot]] = []  # reached BLOCK_ROWS: pack now
        self._staged: list[tuple[Any, ...]] = []
        self._newest = -(1 << 62)
        row = db.execute(f"SELECT MAX(id) FROM {spec.table('blocks')}").fetchone()
        self._next_block = (row[0] or 0) + 1
        full = ", ".join(spec.full)
        marks = ", ".join("?" * (len(spec.full) + 1))
        self._stage_sql = f"INSERT INTO {spec.table('staging')} (block, {full}) VALUES ({marks})"
        keys = "".join(f"{k}, " for k in spec.keys)
        marks = ", ".join("?" * (6 + len(spec.keys)))
        self._block_sql = (
            f"INSERT INTO {spec.table('blocks')} (id, win, {keys}t_first, "
            f"t_last, rows, data) VALUES ({marks})"
        )
        marks = ", ".join("?" * (5 + len(spec.keys)))
        self._tier_sql = (
            f"INSERT INTO {spec.table('tiers')} (block, width_s, win, {keys}"
            f"buckets, data) VALUES ({marks})"
        )
        self._unstage_sql = f"DELETE FROM {spec.table('staging')} WHERE block = ?"

    def add(self, row: tuple[Any, ...]) -> None:
        """Queue one full row (validated by the caller) for the next `write`."""
        slot = row[0] // SLOT_NS
        key = (self._key_of(row) if self._key_of else None, slot)
        entry = self._open.get(key)
        if entry is None:
            entry = self._open[key] = _Slot(self._next_block)
            self._next_block += 1
            if slot > self._newest:
                self._newest = slot
        entry.rows.append(row)
        self._staged.append((entry.block, *row))
        if len(entry.rows) >= BLOCK_ROWS:  # the slot goes on in a new block
            self._full.append((key, self._open.pop(key)))

    def write(self, *, close_all: bool = False) -> None:
        """Stage the rows added since the last call and pack the slots that closed."""
        if self._staged:
            self.db.executemany(self._stage_sql, self._staged)
            self._staged.clear()
        limit = self._newest - _OPEN_SLOTS
        closed = self._full + [
            (k, self._open.pop(k)) for k in list(self._open) if close_all or k[1] <= limit
        ]
        self._full = []
        for key, entry in closed:
            self._pack(key[0], key[1], entry.block, entry.rows)
            self.db.execute(self._unstage_sql, (entry.block,))

    def write_block(self, key: Sequence[int | None], slot: int, full: Sequence[Column]) -> None:
        """Bulk path: store one slot of one key, given as time-sorted full-row columns."""
        rows = len(full[0])
        for first in range(0, rows, BLOCK_ROWS):
            block = self._next_block
            self._next_block += 1
            part = full if rows <= BLOCK_ROWS else [c[first : first + BLOCK_ROWS] for c in full]
            self._store(tuple(key), slot, block, part)

    def _pack(self, key: Any, slot: int, block: int, rows: list[tuple[Any, ...]]) -> None:
        rows.sort(key=self._order)  # stable: rows of one time keep the order they were put in
        keys = () if not self.spec.keys else key if len(self.spec.keys) > 1 else (key,)
        self._store(keys, slot, block, list(zip(*rows, strict=True)))

    def _store(self, keys: tuple[Any, ...], slot: int, block: int, full: Sequence[Column]) -> None:
        spec = self.spec
        times: Column = full[0]
        values = [full[i] for i in spec.value_positions]
        last = spec.end_of(full) if spec.end_of else max(times)  # type: ignore[type-var]
        data = codec.encode(values)
        tiers = []  # everything computed before the first insert: a bad value stores nothing
        if spec.tiered:
            for width_s in TIER_WIDTHS_S:
                columns = bucket_columns(spec, full, width_s * NS_PER_S)
                tiers.append((block, width_s, slot, *keys, len(columns[0]), codec.encode(columns)))
        self.db.execute(self._block_sql, (block, slot, *keys, times[0], last, len(times), data))
        if tiers:
            self.db.executemany(self._tier_sql, tiers)
