"""Columnar block codec: integer columns, delta-coded, narrowed, byte-shuffled, zlib-compressed.

A block holds up to a window of one stream's rows (one GPU's minute of samples, say) as columns.
Each column is stored as the differences between successive values (timestamps become the
sampling period plus jitter, a constant metric becomes zeros), in the narrowest of 1/2/4/8-byte
integers that holds them, with the bytes of the array regrouped by significance ("shuffle": the
constant high bytes of every value end up next to each other), and the whole block is deflated
once. Everything runs in C (array, slicing, itertools, zlib): about 4 ms for a 600-row block of
18 columns on one core, and 12–15 bytes per GPU sample on realistic data (bench/scale.py) where a
row of the same values in SQLite takes about 80.

Layout (before zlib): rows as a 4-byte count, then per column one tag byte and, for a column with
some NULLs, one presence byte per row (for a constant column, its value); then the value arrays
of the columns in order. Constant columns (a link width, a metric that never changed in the
window, most counts of a tier) cost 9 bytes and nothing to decode.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import struct
import zlib
from array import array
from collections.abc import Collection, Sequence
from operator import sub
from typing import Any

FORMAT = 1  # first byte of every block: the layout above
_LEVEL = 6  # zlib level: 6 is ~7 % smaller than 1 for ~30 % more time, paid once per window

# Column tags: what follows for the column.
_ALL_NULL = 0  # nothing
_FULL = 1  # values, no NULL
_MIXED = 2  # a presence byte per row, then the values of the present rows
_CONSTANT = 3  # one value (8 bytes) for every row: costs nothing to decode

_WIDTH_CODES = {1: "b", 2: "h", 4: "i", 8: "q"}
_CODE_TAG = {"b": 1, "h": 2, "i": 4, "q": 8}
_PLAIN = 0x80  # flag on the width byte: values as they are (their differences overflow 64 bits)


class CodecError(ValueError):
    """A block cannot be decoded (damaged data)."""


# What reading a damaged file can raise: SQLite's own errors, a block that does not decode, text
# (the schema, meta) whose bytes are no longer UTF-8 or no longer JSON. Readers turn each into
# one RecordingError line.
READ_ERRORS = (sqlite3.Error, CodecError, UnicodeDecodeError, json.JSONDecodeError)


def _deltas(values: Sequence[int]) -> list[int]:
    return [values[0], *map(sub, values[1:], values[:-1])] if values else []


def _narrowest(deltas: list[int]) -> array[int]:
    low, high = min(deltas), max(deltas)
    for width in (1, 2, 4):
        bound = 1 << (8 * width - 1)
        if -bound <= low and high < bound:
            return array(_WIDTH_CODES[width], deltas)
    return array("q", deltas)  # OverflowError beyond 64 bits: the caller drops such rows


def _shuffled(values: array[int]) -> bytes:
    raw = values.tobytes()
    width = values.itemsize
    return raw if width == 1 else b"".join(raw[i::width] for i in range(width))


def encode(columns: Sequence[Sequence[int | None]]) -> bytes:
    """One block from equally long integer columns (None = NULL)."""
    rows = len(columns[0]) if columns else 0
    head = bytearray(struct.pack("<BI", FORMAT, rows))
    bodies: list[bytes] = []
    for column in columns:
        if len(column) != rows:
            raise ValueError("columns of a block must have the same length")
        nulls = column.count(None) if rows else 0
        if rows == 0 or nulls == rows:
            head.append(_ALL_NULL)
            continue
        first = column[0]
        if not nulls and column.count(first) == rows and -(1 << 63) <= first < (1 << 63):  # type: ignore[operator]  # not None here
            head.append(_CONSTANT)
            head += struct.pack("<q", first)
            continue
        if nulls:
            head.append(_MIXED)
            head += bytes(value is not None for value in column)
            present: Sequence[int] = [value for value in column if value is not None]
        else:
            head.append(_FULL)
            present = column  # type: ignore[assignment]  # no None in it
        try:
            values = _narrowest(_deltas(present))
            head.append(_CODE_TAG[values.typecode])
        except OverflowError:  # e.g. -2**63 next to 2**63 - 1; a value beyond 64 bits raises
            values = array("q", present)
            head.append(_CODE_TAG["q"] | _PLAIN)
        bodies.append(_shuffled(values))
    return zlib.compress(bytes(head) + b"".join(bodies), _LEVEL)


_INT64 = struct.Struct("<q")
_HEAD = struct.Struct("<BI")


def decode(data: bytes, width: int, skip: Collection[int] = ()) -> list[list[int | None]]:
    """The `width` columns of a block, as lists (None = NULL), not to be modified (columns
    of NULLs share one list).

    Columns whose index is in `skip` are not decoded and come back all NULL: a reader that
    needs a few metrics of a wide block saves their cost (about 15 µs per column of 600 rows).
    """
    try:
        raw = zlib.decompress(data)
        version, rows = _HEAD.unpack_from(raw, 0)
    except (zlib.error, struct.error) as error:
        raise CodecError(f"damaged block ({error})") from error
    if version != FORMAT:
        raise CodecError(f"unknown block format {version}")
    skipped = frozenset(skip)
    nulls: list[int | None] = [None] * rows
    columns = [nulls] * width
    wanted: list[tuple[int, bytes | None, int, int, int]] = []  # (column, presence, ...)
    offset = 5
    body = 0  # where each column's values start, after the header
    try:
        # The header: a tag per column (and its presence bytes, width or constant value).
        for index in range(width):
            tag = raw[offset]
            if tag == _CONSTANT:
                if index not in skipped:
                    columns[index] = [_INT64.unpack_from(raw, offset + 1)[0]] * rows
                offset += 9
                continue
            if tag == _ALL_NULL:
                offset += 1
                continue
            presence = None
            count = rows
            if tag == _MIXED:
                presence = raw[offset + 1 : offset + 1 + rows]
                count = presence.count(1)
                offset += rows
            elif tag != _FULL:
                raise CodecError(f"damaged block (column tag {tag})")
            itemsize = raw[offset + 1]
            offset += 2
            if index not in skipped:
                wanted.append((index, presence, itemsize, body, count))
            body += count * (itemsize & ~_PLAIN)
        if offset + body > len(raw):
            raise CodecError("damaged block (short column)")
        # The values of the columns asked for: delta-coded, narrowed, byte-shuffled.
        for index, presence, itemsize, start, count in wanted:
            plain_flag = itemsize & _PLAIN
            itemsize &= ~_PLAIN
            start += offset
            size = count * itemsize
            planes = raw[start : start + size]
            if itemsize == 1:
                numbers = array("b", planes)
            else:
                unshuffled = bytearray(size)
                for i in range(itemsize):
                    unshuffled[i::itemsize] = planes[i * count : (i + 1) * count]
                numbers = array(_WIDTH_CODES[itemsize], unshuffled)
            values: list[Any] = (
                numbers.tolist() if plain_flag else list(itertools.accumulate(numbers))
            )
            if presence is not None:
                present = iter(values)
                values = [next(present) if flag else None for flag in presence]
            columns[index] = values
    except (IndexError, KeyError, ValueError, StopIteration, struct.error) as error:
        if isinstance(error, CodecError):
            raise
        raise CodecError(f"damaged block ({error})") from error
    return columns
