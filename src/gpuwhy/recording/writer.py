"""RecordingWriter: records go into a bounded queue; one thread writes them to SQLite.

`put` is what the sampler and the span listener call, so it must cost next to nothing and never
wait: it appends to a deque (atomic in CPython) and counts a drop when the queue is full. The
writer thread wakes every `flush_interval_s`, writes everything queued in one transaction and
commits. WAL with `synchronous=NORMAL` makes each commit durable against a crash of the process
(not of the machine), so a `kill -9` loses at most the last interval and leaves a file that opens.
On `close` the WAL is folded back and the file switched to a plain rollback journal: a finished
recording is one self-contained file that can be copied and read from a read-only folder.

Samples and spans are stored in format 2 (streams.py): each flush stages the new rows; a slot of
time packs into one compressed block with its downsampled tiers once it closes (blockwriter.py).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import sqlite3
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

from gpuwhy.model import DeviceInfo, Event, GpuSample, HostSample, Record, Span, UtilSample
from gpuwhy.recording import schema, streams
from gpuwhy.recording.blockwriter import StreamWriter

_WRITE_CHUNK = 20_000  # rows per executemany: bounds the writer's own lists, not the transaction
# Errors of one row's values (a wrong type, an integer beyond 64 bits), not of the file.
_BAD_ROW = (sqlite3.InterfaceError, sqlite3.ProgrammingError, sqlite3.IntegrityError, OverflowError)

_gpu_row = attrgetter(*schema.GPU_COLUMNS)


def _tenths(value: float | None) -> int | None:
    return None if value is None else round(value * 10)


def _host_row(s: HostSample) -> tuple[Any, ...]:
    return (
        s.t_ns,
        _tenths(s.cpu_system_pct),
        _tenths(s.job_cpu_pct),
        s.job_rss_bytes,
        s.job_processes,
        s.memory_available_bytes,
    )


def _checked(row: tuple[Any, ...], keys: int) -> tuple[Any, ...]:
    """The row if every value is a 64-bit integer or NULL (the first `keys` never NULL)."""
    array("q", filter(None, row))  # TypeError / OverflowError otherwise, at C speed
    if None in row[:keys]:
        raise TypeError("time and key fields must be set")
    return row


def _device_row(d: DeviceInfo) -> tuple[Any, ...]:
    cc = d.compute_capability
    return (
        d.index,
        d.name,
        d.uuid,
        d.pci_bus_id,
        d.memory_total_bytes,
        cc[0] if cc else None,
        cc[1] if cc else None,
        d.sm_clock_max_mhz,
        d.power_limit_mw,
        d.pcie_gen_max,
        d.pcie_width_max,
        d.mig_mode,
        d.gpm_supported,
    )


def _to_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


class _FlushMarker:
    """Queued by `flush`: set once everything queued before it is committed."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class RecordingWriter:
    """Writes records to a new recording file from a thread of its own (see module doc)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        flush_interval_s: float = 1.0,
        max_queue: int = 200_000,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.path = os.fspath(path)
        self.dropped = 0
        self.error: str | None = None  # set if a write failed; later records are dropped
        self._flush_interval_s = flush_interval_s
        self._max_queue = max_queue
        self._clock = clock
        self._queue: collections.deque[Any] = collections.deque()
        self._drop_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._closed = False
        self._phase_ids: dict[str, int] = {}
        self._span_seq = 0
        self._db = schema.create_empty(self.path)
        self._gpu, self._util, self._host, self._spans = (
            StreamWriter(self._db, spec) for spec in streams.STREAMS
        )
        self._write_meta("schema_version", schema.RECORDING_FORMAT_VERSION)
        self._write_meta("complete", False)
        self._write_meta("created_ns", clock())
        self._write_meta("created_wall_s", time.time())
        self._thread = threading.Thread(target=self._run, name="gpuwhy-writer", daemon=True)
        self._thread.start()

    # ---- called from any thread -------------------------------------------------------------

    def put(self, record: Record) -> None:
        """Queue one record: O(1), never blocks, never raises; counts a drop if full or closed."""
        if len(self._queue) >= self._max_queue or self._stopping or self.error is not None:
            self._count_drops(1)
            return
        self._queue.append(record)

    def _count_drops(self, count: int) -> None:
        with self._drop_lock:
            self.dropped += count

    def set_meta(self, key: str, value: Any) -> None:
        """Set a metadata entry (JSON value, replaces an older one). Never dropped."""
        self._queue.append(("meta", key, _to_json(value)))

    def add_devices(self, devices: Sequence[DeviceInfo]) -> None:
        """Describe the devices the samples refer to (replaces entries of the same index)."""
        self._queue.append(("devices", [_device_row(d) for d in devices]))

    def put_block(
        self, stream: str, key: Sequence[int], slot: int, columns: Sequence[Sequence[int | None]]
    ) -> None:
        """Bulk path (generated or imported data): one slot of one key of a sample stream.

        `stream` is "gpu", "util" or "host"; `columns` are the stream's full-row columns
        (streams.py) for the rows of `slot`, sorted by time; `key` the block's key values
        (the device; none for host). Never dropped: call `flush` to bound the queue.
        """
        self._queue.append(("block", stream, tuple(key), slot, columns))

    def flush(self) -> None:
        """Return once every record put so far is committed (or the writer has stopped)."""
        marker = _FlushMarker()
        self._queue.append(marker)
        self._wake.set()
        while not marker.done.wait(0.1):
            if not self._thread.is_alive():
                return

    def close(self) -> None:
        """Write what is queued, mark the recording complete and close the file. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stopping = True
        self._wake.set()
        self._thread.join()

    # ---- writer thread ----------------------------------------------------------------------

    def _write_meta(self, key: str, value: Any) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, _to_json(value))
        )

    def _run(self) -> None:
        try:
            while True:
                self._wake.wait(self._flush_interval_s)
                self._wake.clear()
                stopping = self._stopping
                self._write_batch()
                if stopping:
                    self._finish()
                    return
        except BaseException as error:  # never let the thread die silently or raise elsewhere
            self._fail(error)
            self._release_markers()
            with contextlib.suppress(sqlite3.Error):
                self._db.close()

    def _write_batch(self) -> None:
        """Write what is queued now, in one transaction, then release waiting flushes."""
        markers: list[_FlushMarker] = []
        if not self._queue:
            return
        if self.error is None:
            try:
                self._db.execute("BEGIN")
                self._drain(markers)
                self._db.execute("COMMIT")
            except sqlite3.Error as error:
                self._fail(error)
        if self.error is not None:
            self._discard(markers)
        for marker in markers:
            marker.done.set()

    def _drain(self, markers: list[_FlushMarker]) -> None:
        queue = self._queue
        events: list[tuple[Any, ...]] = []
        gpu, util, host, spans = self._gpu.add, self._util.add, self._host.add, self._spans.add
        pending = 0
        for _ in range(len(queue)):  # only what is there now: producers may keep adding
            item = queue.popleft()
            kind = type(item)
            try:
                if kind is GpuSample:
                    gpu(_checked(_gpu_row(item), 2))
                elif kind is UtilSample:
                    util(_checked((item.t_ns, item.device, int(item.kind), item.value_pct), 3))
                elif kind is HostSample:
                    host(_checked(_host_row(item), 1))
                elif kind is Span:
                    spans(self._span_row(item))
                elif kind is Event:
                    events.append((item.t_ns, item.kind, item.message, _to_json(dict(item.data))))
                elif kind is _FlushMarker:
                    markers.append(item)
                    continue
                else:
                    self._control(item)
                    continue
            except (TypeError, ValueError, AttributeError, *_BAD_ROW):  # malformed: only it is lost
                self._count_drops(1)
                continue
            pending += 1
            if pending >= _WRITE_CHUNK:
                self._insert(events)
                pending = 0
        self._insert(events)

    def _span_row(self, span: Span) -> tuple[Any, ...]:
        if not isinstance(span.phase, str):
            raise TypeError("a span's phase is a name")
        self._span_seq += 1
        return _checked(
            (
                span.start_ns,
                self._span_seq,
                int(span.kind),
                self._phase_id(span.phase),
                span.pid,
                max(0, span.end_ns - span.start_ns),
                span.step,
                span.steps,
            ),
            4,
        )

    def _insert(self, events: list[Any], *, close_all: bool = False) -> None:
        for stream in (self._gpu, self._util, self._host, self._spans):
            stream.write(close_all=close_all)
        if events:
            try:
                self._db.executemany(_EVENT_SQL, events)
            except _BAD_ROW:  # a value SQLite cannot store: keep the others, drop that one
                for row in events:
                    try:
                        self._db.execute(_EVENT_SQL, row)
                    except _BAD_ROW:
                        self._count_drops(1)
            events.clear()

    def _control(self, item: Any) -> None:
        if isinstance(item, tuple) and item and item[0] == "meta":
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", item[1:])
        elif isinstance(item, tuple) and item and item[0] == "devices":
            self._db.executemany(_DEVICE_SQL, item[1])
        elif isinstance(item, tuple) and item and item[0] == "block":
            _, stream, key, slot, columns = item
            target = {"gpu": self._gpu, "util": self._util, "host": self._host}[stream]
            target.write_block(key, slot, columns)

    def _phase_id(self, name: str) -> int:
        phase_id = self._phase_ids.get(name)
        if phase_id is None:
            row = self._db.execute("SELECT id FROM phases WHERE name = ?", (name,)).fetchone()
            if row is None:
                cursor = self._db.execute("INSERT INTO phases (name) VALUES (?)", (name,))
                phase_id = int(cursor.lastrowid or 0)
            else:
                phase_id = int(row[0])
            self._phase_ids[name] = phase_id
        return phase_id

    def _finish(self) -> None:
        db = self._db
        try:
            if self.error is None:
                # A reader holding the file open must not stall close() for long.
                db.execute("PRAGMA busy_timeout = 200")
                db.execute("BEGIN")
                self._insert([], close_all=True)  # pack the slots still open
                self._write_meta("writer_dropped", self.dropped)
                self._write_meta("complete", True)
                db.execute("COMMIT")
                db.executescript("PRAGMA incremental_vacuum;")  # hand staging pages back
                # Fold the WAL into the file and leave WAL mode: one self-contained file. Fails
                # harmlessly (stays WAL) if a reader holds the file open right now.
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                with contextlib.suppress(sqlite3.OperationalError):
                    db.execute("PRAGMA journal_mode = DELETE")
        except sqlite3.Error as error:
            self._fail(error)
        finally:
            db.close()

    def _fail(self, error: BaseException) -> None:
        if self.error is None:
            self.error = f"{type(error).__name__}: {error}"
        try:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def _discard(self, markers: list[_FlushMarker]) -> None:
        """After a failed write: count what is queued as dropped so memory stays bounded."""
        lost = 0
        for _ in range(len(self._queue)):
            item = self._queue.popleft()
            if type(item) is _FlushMarker:
                markers.append(item)
            elif not isinstance(item, tuple):
                lost += 1
        self._count_drops(lost)

    def _release_markers(self) -> None:
        markers: list[_FlushMarker] = []
        self._discard(markers)
        for marker in markers:
            marker.done.set()


_EVENT_SQL = schema.insert_sql("events", schema.EVENT_COLUMNS)
_DEVICE_SQL = schema.insert_sql("devices", schema.DEVICE_COLUMNS).replace(
    "INSERT", "INSERT OR REPLACE", 1
)
