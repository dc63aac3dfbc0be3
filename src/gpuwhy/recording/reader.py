"""Recording: read a recording back, streamed, in bounded memory however long the run.

Every sample iterator is a single SQL range scan over a table clustered on time (schema.py), so
rows come off the B-tree in time order without sorting and without holding the result: memory is
SQLite's page cache (a few MB) plus the row in hand. A file that cannot be read — missing, empty,
cut short, not SQLite, another program's SQLite, a newer gpuwhy's — gets one `RecordingError`
with a one-line message and the fix, at `open` or, for damage deep inside, while iterating.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from gpuwhy.errors import RecordingError
from gpuwhy.model import (
    DeviceInfo,
    Event,
    GpuSample,
    HostSample,
    Span,
    SpanKind,
    UtilKind,
    UtilSample,
)
from gpuwhy.recording import schema

_SQLITE_MAGIC = b"SQLite format 3\x00"
_NOT_OURS_FIX = "pass a file written by 'gpuwhy run' or gpuwhy.monitor()"
T = TypeVar("T")


def _tenths_back(value: int | None) -> float | None:
    return None if value is None else value / 10


def _host(t_ns: int, cpu: int | None, job_cpu: int | None, rss: int | None, procs: int | None,
          available: int | None) -> HostSample:
    return HostSample(t_ns, _tenths_back(cpu), _tenths_back(job_cpu), rss, procs, available)


def _util(t_ns: int, device: int, kind: int, value: int) -> UtilSample:
    return UtilSample(t_ns, device, UtilKind(kind), value)


def _device(idx: int, name: str, uuid: str | None, bus: str | None, memory: int | None,
            cc_major: int | None, cc_minor: int | None, *rest: int | None) -> DeviceInfo:
    clock, power, gen, width, mig, gpm = rest
    return DeviceInfo(
        index=idx, name=name, uuid=uuid, pci_bus_id=bus, memory_total_bytes=memory,
        compute_capability=None if cc_major is None else (cc_major, cc_minor or 0),
        sm_clock_max_mhz=clock, power_limit_mw=power, pcie_gen_max=gen, pcie_width_max=width,
        mig_mode=None if mig is None else bool(mig),
        gpm_supported=None if gpm is None else bool(gpm),
    )


def check_file(path: Path) -> None:
    """Cheap checks on the file itself, before SQLite sees it (RecordingError if it is bad)."""
    name = str(path)
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise RecordingError(f"{name} is a folder, not a recording",
                                 f"pass the {schema.FILE_SUFFIX} file inside it")
        with path.open("rb") as handle:
            header = handle.read(100)
    except FileNotFoundError as error:
        raise RecordingError(f"no recording at {name}",
                             "check the path ('gpuwhy run --record FILE' writes one)") from error
    except OSError as error:
        raise RecordingError(f"cannot read {name}: {error.strerror}",
                             "check the file's permissions") from error
    if size == 0:
        raise RecordingError(f"{name} is empty (0 bytes): the recording was never written",
                             "record the run again")
    if not header.startswith(_SQLITE_MAGIC[: len(header)]) or len(header) < len(_SQLITE_MAGIC):
        raise RecordingError(f"{name} is not a gpuwhy recording (not an SQLite file)",
                             _NOT_OURS_FIX)
    if len(header) < 100:
        raise RecordingError(f"{name} is truncated ({size} bytes)",
                             "copy the whole file again; a cut-off recording cannot be read")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The in-header page count is valid when the change counter matches version-valid-for.
    if header[24:28] == header[92:96] and pages and size < pages * page_size:
        raise RecordingError(
            f"{name} is truncated ({size} of {pages * page_size} bytes)",
            "copy the whole file again; a cut-off recording cannot be read")


class Recording:
    """A recording opened for reading. Use `Recording.open(path)`; also a context manager."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self._db = connection
        self._phases: dict[int, str] = {}
        self.meta: dict[str, Any] = {}
        self.devices: list[DeviceInfo] = []

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Recording:
        """Open a recording; RecordingError (one line, with the fix) if it cannot be read."""
        where = Path(path)
        check_file(where)
        try:
            uri = where.absolute().as_uri() + "?mode=ro"
            connection = sqlite3.connect(uri, uri=True, check_same_thread=False)
        except sqlite3.Error as error:
            raise RecordingError(f"cannot open {where}: {error}",
                                 "check the file and its folder are readable") from error
        recording = cls(where, connection)
        try:
            recording._load()
        except RecordingError:
            connection.close()
            raise
        except sqlite3.Error as error:
            connection.close()
            raise recording._damaged(error) from error
        return recording

    def _load(self) -> None:
        app_id = self._db.execute("PRAGMA application_id").fetchone()[0]
        if app_id != schema.APPLICATION_ID:
            raise RecordingError(f"{self.path} is an SQLite database but not a gpuwhy recording",
                                 _NOT_OURS_FIX)
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > schema.SCHEMA_VERSION:
            raise RecordingError(
                f"{self.path} was written by a newer gpuwhy (recording format {version}; this "
                f"version reads up to {schema.SCHEMA_VERSION})", "upgrade: pip install -U gpuwhy")
        if version < 1:
            raise RecordingError(f"{self.path} has no recording format version", _NOT_OURS_FIX)
        self.meta = {key: json.loads(value) for key, value in
                     self._db.execute("SELECT key, value FROM meta")}
        columns = ", ".join(schema.DEVICE_COLUMNS)
        self.devices = [_device(*row) for row in
                        self._db.execute(f"SELECT {columns} FROM devices ORDER BY idx")]
        self._load_phases()

    def _load_phases(self) -> None:
        self._phases = dict(self._db.execute("SELECT id, name FROM phases"))

    def _damaged(self, error: sqlite3.Error) -> RecordingError:
        text = str(error).splitlines()[0] if str(error) else type(error).__name__
        if "not a database" in text:
            return RecordingError(f"{self.path} is not a gpuwhy recording (corrupt or not "
                                  "SQLite)", _NOT_OURS_FIX)
        return RecordingError(f"{self.path} is damaged ({text})",
                              "record again; if it was copied, copy it again with its -wal file")

    @property
    def complete(self) -> bool:
        """True if the writer closed the file; False while recording or after a crash."""
        return self.meta.get("complete") is True

    # ---- streamed reads ---------------------------------------------------------------------

    def _rows(self, sql: str, params: tuple[Any, ...], make: Callable[..., T]) -> Iterator[T]:
        try:
            for row in self._db.execute(sql, params):
                yield make(*row)
        except sqlite3.Error as error:
            raise self._damaged(error) from error

    @staticmethod
    def _where(device: int | None, start_ns: int | None, end_ns: int | None,
               time_column: str = "t_ns") -> tuple[str, tuple[Any, ...]]:
        clauses: list[str] = []
        params: list[Any] = []
        if start_ns is not None:
            clauses.append(f"{time_column} >= ?")
            params.append(start_ns)
        if end_ns is not None:
            clauses.append(f"{time_column} < ?")
            params.append(end_ns)
        if device is not None:
            clauses.append("device = ?")
            params.append(device)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), tuple(params)

    def gpu_samples(self, device: int | None = None, start_ns: int | None = None,
                    end_ns: int | None = None) -> Iterator[GpuSample]:
        """GPU samples with start_ns <= t_ns < end_ns, in time order (then device), streamed."""
        where, params = self._where(device, start_ns, end_ns)
        sql = (f"SELECT {', '.join(schema.GPU_COLUMNS)} FROM gpu_samples{where} "
               "ORDER BY t_ns, device")
        return self._rows(sql, params, GpuSample)

    def util_samples(self, device: int | None = None, start_ns: int | None = None,
                     end_ns: int | None = None) -> Iterator[UtilSample]:
        """Driver-buffered utilization samples in the range, in time order, streamed."""
        where, params = self._where(device, start_ns, end_ns)
        sql = (f"SELECT {', '.join(schema.UTIL_COLUMNS)} FROM util_samples{where} "
               "ORDER BY t_ns, device, kind")
        return self._rows(sql, params, _util)

    def host_samples(self, start_ns: int | None = None,
                     end_ns: int | None = None) -> Iterator[HostSample]:
        """Host samples in the range, in time order, streamed."""
        where, params = self._where(None, start_ns, end_ns)
        sql = f"SELECT {', '.join(schema.HOST_COLUMNS)} FROM host_samples{where} ORDER BY t_ns"
        return self._rows(sql, params, _host)

    def spans(self, kind: SpanKind | None = None, phase: str | None = None) -> Iterator[Span]:
        """Spans (optionally of one kind and/or phase) in order of their start, streamed."""
        try:
            self._load_phases()  # a live recording may have gained phases since open
        except sqlite3.Error as error:
            raise self._damaged(error) from error
        clauses: list[str] = []
        params: list[Any] = []
        if kind is not None:
            clauses.append("kind = ?")
            params.append(int(kind))
        if phase is not None:
            ids = [i for i, name in self._phases.items() if name == phase]
            if not ids:
                return iter(())
            clauses.append("phase_id = ?")
            params.append(ids[0])
        where = " WHERE " + " AND ".join(clauses) if clauses else ""
        sql = f"SELECT {', '.join(schema.SPAN_COLUMNS)} FROM spans{where} ORDER BY start_ns, rowid"
        phases = self._phases

        def make(start: int, duration: int, kind_value: int, phase_id: int, step: int | None,
                 steps: int, pid: int | None) -> Span:
            return Span(phases.get(phase_id, f"phase-{phase_id}"), SpanKind(kind_value), start,
                        start + duration, step, steps, pid)

        return self._rows(sql, tuple(params), make)

    def events(self) -> Iterator[Event]:
        """Events in time order, streamed."""
        sql = f"SELECT {', '.join(schema.EVENT_COLUMNS)} FROM events ORDER BY t_ns, rowid"

        def make(t_ns: int, kind: str, message: str, data: str) -> Event:
            return Event(t_ns, kind, message, json.loads(data))

        return self._rows(sql, (), make)

    def time_range(self) -> tuple[int, int] | None:
        """(earliest, latest) timestamp of anything recorded, or None for an empty recording."""
        sql = """SELECT MIN(lo), MAX(hi) FROM (
            SELECT MIN(t_ns) AS lo, MAX(t_ns) AS hi FROM gpu_samples
            UNION ALL SELECT MIN(t_ns), MAX(t_ns) FROM util_samples
            UNION ALL SELECT MIN(t_ns), MAX(t_ns) FROM host_samples
            UNION ALL SELECT MIN(start_ns), MAX(start_ns + duration_ns) FROM spans
            UNION ALL SELECT MIN(t_ns), MAX(t_ns) FROM events)"""
        try:
            low, high = self._db.execute(sql).fetchone()
        except sqlite3.Error as error:
            raise self._damaged(error) from error
        return None if low is None else (int(low), int(high))

    def gpu_averages(self, start_ns: int | None = None, end_ns: int | None = None,
                     ) -> dict[int, dict[str, float | int | None]]:
        """Per device: sample count and the mean of every GPU metric over the range.

        Computed by SQLite in one scan (no Python object per row): the fast path for aligning
        utilization to phases and steps in long recordings. A metric never reported is None.
        """
        metrics = schema.GPU_COLUMNS[2:]
        where, params = self._where(None, start_ns, end_ns)
        sql = (f"SELECT device, COUNT(*), {', '.join(f'AVG({m})' for m in metrics)} "
               f"FROM gpu_samples{where} GROUP BY device ORDER BY device")
        result: dict[int, dict[str, float | int | None]] = {}
        for row in self._rows(sql, params, lambda *r: r):
            entry: dict[str, float | int | None] = {"samples": row[1]}
            entry.update(zip(metrics, row[2:], strict=False))
            result[int(row[0])] = entry
        return result

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._db.close()

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
