"""Recording: read a recording back, streamed, in bounded memory however long the run.

Every sample iterator walks the blocks of its time range in order (blockreader.py), one storage slot
(a minute) of rows at a time: memory is SQLite's page cache (a few MB) plus one slot's rows, however
long the run. Long runs are best read through the downsampled tiers (`gpu_tiers`, `util_tiers`,
`host_tiers`: per-1 s or per-1 min count, sum, min and max of every metric) and the exact window
summaries built on them (`gpu_summary`...), which touch raw samples only at a window's edges.
A file that cannot be read — missing, empty, cut short, not SQLite, another program's SQLite, a
newer gpuwhy's — gets one `RecordingError` with a one-line message and the fix, at `open` or, for
damage deep inside, while iterating.
Only recording format 2 is read; a format-1 file gets a one-line error saying so.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
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
from gpuwhy.recording import blockcolumns, blockreader, schema, spancolumns
from gpuwhy.recording.codec import READ_ERRORS
from gpuwhy.recording.reader_tiers import TierReads
from gpuwhy.recording.spancolumns import SpanColumns
from gpuwhy.recording.streams import GPU, HOST, SPAN, UTIL, StreamSpec

_SQLITE_MAGIC = b"SQLite format 3\x00"
_NOT_OURS_FIX = "pass a file written by 'gpuwhy run' or gpuwhy.monitor()"
T = TypeVar("T")


def _tenths_back(value: int | None) -> float | None:
    return None if value is None else value / 10


def _host(
    t_ns: int,
    cpu: int | None,
    job_cpu: int | None,
    rss: int | None,
    procs: int | None,
    available: int | None,
) -> HostSample:
    return HostSample(t_ns, _tenths_back(cpu), _tenths_back(job_cpu), rss, procs, available)


_UTIL_KINDS = {int(k): k for k in UtilKind}  # a dict lookup: Enum(value) costs a µs a record
_SPAN_KINDS = {int(k): k for k in SpanKind}


def _util(t_ns: int, device: int, kind: int, value: int) -> UtilSample:
    return UtilSample(t_ns, device, _UTIL_KINDS.get(kind) or UtilKind(kind), value)


def _device(
    idx: int,
    name: str,
    uuid: str | None,
    bus: str | None,
    memory: int | None,
    cc_major: int | None,
    cc_minor: int | None,
    *rest: int | None,
) -> DeviceInfo:
    clock, power, gen, width, mig, gpm = rest
    return DeviceInfo(
        index=idx,
        name=name,
        uuid=uuid,
        pci_bus_id=bus,
        memory_total_bytes=memory,
        compute_capability=None if cc_major is None else (cc_major, cc_minor or 0),
        sm_clock_max_mhz=clock,
        power_limit_mw=power,
        pcie_gen_max=gen,
        pcie_width_max=width,
        mig_mode=None if mig is None else bool(mig),
        gpm_supported=None if gpm is None else bool(gpm),
    )


def check_file(path: Path) -> None:
    """Cheap checks on the file itself, before SQLite sees it (RecordingError if it is bad)."""
    name = str(path)
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise RecordingError(
                f"{name} is a folder, not a recording",
                f"pass the {schema.FILE_SUFFIX} file inside it",
            )
        with path.open("rb") as handle:
            header = handle.read(100)
    except FileNotFoundError as error:
        raise RecordingError(
            f"no recording at {name}", "check the path ('gpuwhy run --record FILE' writes one)"
        ) from error
    except OSError as error:
        raise RecordingError(
            f"cannot read {name}: {error.strerror}", "check the file's permissions"
        ) from error
    if size == 0:
        raise RecordingError(
            f"{name} is empty (0 bytes): the recording was never written", "record the run again"
        )
    if not header.startswith(_SQLITE_MAGIC[: len(header)]) or len(header) < len(_SQLITE_MAGIC):
        raise RecordingError(
            f"{name} is not a gpuwhy recording (not an SQLite file)", _NOT_OURS_FIX
        )
    if len(header) < 100:
        raise RecordingError(
            f"{name} is truncated ({size} bytes)",
            "copy the whole file again; a cut-off recording cannot be read",
        )
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The in-header page count is valid when the change counter matches version-valid-for.
    if header[24:28] == header[92:96] and pages and size < pages * page_size:
        raise RecordingError(
            f"{name} is truncated ({size} of {pages * page_size} bytes)",
            "copy the whole file again; a cut-off recording cannot be read",
        )


_STORED = ("blocks", "staging")  # where a stream's rows are: packed, or of slots still open


class Recording(TierReads):
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
            raise RecordingError(
                f"cannot open {where}: {error}", "check the file and its folder are readable"
            ) from error
        recording = cls(where, connection)
        try:
            recording._load()
        except RecordingError:
            connection.close()
            raise
        except READ_ERRORS as error:
            connection.close()
            raise recording._damaged(error) from error
        return recording

    def _load(self) -> None:
        app_id = self._db.execute("PRAGMA application_id").fetchone()[0]
        if app_id != schema.APPLICATION_ID:
            raise RecordingError(
                f"{self.path} is an SQLite database but not a gpuwhy recording", _NOT_OURS_FIX
            )
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > schema.RECORDING_FORMAT_VERSION:
            raise RecordingError(
                f"{self.path} was written by a newer gpuwhy (recording format {version}; this "
                f"version reads up to {schema.RECORDING_FORMAT_VERSION})",
                "upgrade: pip install -U gpuwhy",
            )
        if version < 1:
            raise RecordingError(f"{self.path} has no recording format version", _NOT_OURS_FIX)
        if version < schema.RECORDING_FORMAT_VERSION:
            raise RecordingError(
                f"{self.path} was written by an older gpuwhy (recording format {version}; this "
                f"version reads format {schema.RECORDING_FORMAT_VERSION} only)",
                "record the job again with this gpuwhy",
            )
        schema.probe(self._db)
        self.meta = {
            key: json.loads(value) for key, value in self._db.execute("SELECT key, value FROM meta")
        }
        columns = ", ".join(schema.DEVICE_COLUMNS)
        self.devices = [
            _device(*row) for row in self._db.execute(f"SELECT {columns} FROM devices ORDER BY idx")
        ]
        self._load_phases()

    def _load_phases(self) -> None:
        self._phases = dict(self._db.execute("SELECT id, name FROM phases"))

    def _damaged(self, error: Exception) -> RecordingError:
        text = str(error).splitlines()[0] if str(error) else type(error).__name__
        if "not a database" in text:
            return RecordingError(
                f"{self.path} is not a gpuwhy recording (corrupt or not SQLite)", _NOT_OURS_FIX
            )
        return RecordingError(
            f"{self.path} is damaged ({text})",
            "record again; if it was copied, copy it again with its -wal file",
        )

    @property
    def complete(self) -> bool:
        """True if the writer closed the file; False while recording or after a crash."""
        return self.meta.get("complete") is True

    # ---- streamed reads ---------------------------------------------------------------------

    def _stream(self, rows: Iterable[Any], make: Callable[..., T]) -> Iterator[T]:
        try:
            yield from itertools.starmap(make, rows)
        except READ_ERRORS as error:
            raise self._damaged(error) from error

    def _sample_rows(
        self, spec: StreamSpec, device: int | None, start_ns: int | None, end_ns: int | None
    ) -> Iterator[tuple[Any, ...]]:
        keys = {} if device is None or not spec.keys else {"device": device}
        return blockreader.rows(self._db, spec, start_ns, end_ns, keys)

    def gpu_samples(
        self, device: int | None = None, start_ns: int | None = None, end_ns: int | None = None
    ) -> Iterator[GpuSample]:
        """GPU samples with start_ns <= t_ns < end_ns, in time order (then device), streamed."""
        return self._stream(self._sample_rows(GPU, device, start_ns, end_ns), GpuSample)

    def util_samples(
        self, device: int | None = None, start_ns: int | None = None, end_ns: int | None = None
    ) -> Iterator[UtilSample]:
        """Driver-buffered utilization samples in the range, in time order, streamed."""
        return self._stream(self._sample_rows(UTIL, device, start_ns, end_ns), _util)

    def host_samples(
        self, start_ns: int | None = None, end_ns: int | None = None
    ) -> Iterator[HostSample]:
        """Host samples in the range, in time order, streamed."""
        return self._stream(self._sample_rows(HOST, None, start_ns, end_ns), _host)

    def spans(self, kind: SpanKind | None = None, phase: str | None = None) -> Iterator[Span]:
        """Spans (optionally of one kind and/or phase) in order of their start, streamed."""
        try:
            self._load_phases()  # a live recording may have gained phases since open
        except READ_ERRORS as error:
            raise self._damaged(error) from error
        phase_id = None
        if phase is not None:
            ids = [i for i, name in self._phases.items() if name == phase]
            if not ids:
                return iter(())
            phase_id = ids[0]
        kind_value = None if kind is None else int(kind)
        keys = {
            name: value
            for name, value in (("kind", kind_value), ("phase_id", phase_id))
            if value is not None
        }
        rows = blockreader.rows(self._db, SPAN, keys=keys)
        phases = self._phases

        def make(
            start: int,
            _seq: int,
            kind_value: int,
            phase_id: int,
            pid: int | None,
            duration: int,
            step: int | None,
            steps: int,
        ) -> Span:
            return Span(
                phases.get(phase_id, f"phase-{phase_id}"),
                _SPAN_KINDS.get(kind_value) or SpanKind(kind_value),
                start,
                start + duration,
                step,
                steps,
                pid,
            )

        return self._stream(rows, make)

    def span_columns(
        self,
        kind: SpanKind | None = None,
        start_ns: int | None = None,
        end_ns: int | None = None,
        *,
        steps: bool = True,
    ) -> Iterator[SpanColumns]:
        """Every span (or every span of one kind) as columns, one stored block at a time: the
        same spans as `spans()` without an object per span (spancolumns.py). With
        `start_ns`/`end_ns`, only the spans overlapping that range; with `steps=False`, their
        step columns left out (NULL), for readers of times only."""
        try:
            self._load_phases()
        except READ_ERRORS as error:
            raise self._damaged(error) from error
        return self._guarded(
            spancolumns.span_columns(self._db, self._phases, kind, start_ns, end_ns, steps=steps)
        )

    def _guarded(self, items: Iterator[T]) -> Iterator[T]:
        try:
            yield from items
        except READ_ERRORS as error:
            raise self._damaged(error) from error

    def events(self) -> Iterator[Event]:
        """Events in time order, streamed."""
        sql = f"SELECT {', '.join(schema.EVENT_COLUMNS)} FROM events ORDER BY t_ns, rowid"

        def make(t_ns: int, kind: str, message: str, data: str) -> Event:
            return Event(t_ns, kind, message, json.loads(data))

        def rows() -> Iterator[Any]:
            for row in self._db.execute(sql):  # noqa: UP028 (see blockreader._select_blocks)
                yield row

        return self._stream(rows(), make)

    def rows_at_most(
        self,
        stream: str,
        start_ns: int | None = None,
        end_ns: int | None = None,
        kind: SpanKind | None = None,
    ) -> int:
        """An upper bound on the records of `stream` ("gpu", "util", "host", "span"; spans of
        one `kind`) in [start_ns, end_ns): the rows of the stored blocks touching the range, from
        their counts alone (no data read: for choosing how to read a range)."""
        spec = {s.name: s for s in (GPU, UTIL, HOST, SPAN)}[stream]
        try:
            keys = {} if kind is None else {"kind": int(kind)}
            return blockcolumns.row_count(
                self._db, spec, start_ns, end_ns, keys, by_end=spec is SPAN
            )
        except READ_ERRORS as error:
            raise self._damaged(error) from error

    def sampled_devices(self) -> list[int]:
        """Every GPU index with GPU or utilization samples, listed in `devices` or not."""
        parts = [f"SELECT device FROM {s.table(kind)}" for s in (GPU, UTIL) for kind in _STORED]
        try:
            rows = self._db.execute(" UNION ".join(parts) + " ORDER BY device").fetchall()
        except READ_ERRORS as error:
            raise self._damaged(error) from error
        return [int(device) for (device,) in rows if device is not None]

    def time_range(self) -> tuple[int, int] | None:
        """(earliest, latest) timestamp of anything recorded, or None for an empty recording."""
        try:
            bounds = [blockreader.time_bounds(self._db, spec) for spec in (GPU, UTIL, HOST, SPAN)]
            bounds.append(self._db.execute("SELECT MIN(t_ns), MAX(t_ns) FROM events").fetchone())
            lows = [b[0] for b in bounds if b[0] is not None]
            highs = [b[1] for b in bounds if b[1] is not None]
        except READ_ERRORS as error:
            raise self._damaged(error) from error
        return (int(min(lows)), int(max(highs))) if lows else None

    def run_bounds(self) -> tuple[int, int] | None:
        """(start, end) of the run: the times `gpuwhy run` wrote into the meta, each falling back
        to the first/last record when missing (a crashed writer leaves no end); None when the
        file holds neither. The one definition every analysis and report uses."""
        start, end = self.meta.get("start_ns"), self.meta.get("end_ns")
        if isinstance(start, int) and isinstance(end, int):
            return start, max(end, start)
        bounds = self.time_range()
        if bounds is None and not isinstance(start, int):
            return None
        start = start if isinstance(start, int) else bounds[0]  # type: ignore[index]
        end = end if isinstance(end, int) else (bounds[1] if bounds else start)
        return start, max(end, start)

    def time_origin(self) -> int:
        """Time zero for drawing the run: its start, or the first record if that is earlier
        (nothing drawn may fall before zero); 0 for an empty file."""
        start = self.meta.get("start_ns")
        bounds = self.time_range()
        candidates = ([start] if isinstance(start, int) else []) + ([bounds[0]] if bounds else [])
        return min(candidates, default=0)

    def gpu_averages(
        self,
        start_ns: int | None = None,
        end_ns: int | None = None,
    ) -> dict[int, dict[str, float | int | None]]:
        """Per device: sample count and the mean of every GPU metric over the range.

        Exact, from the tiers inside the range and raw samples at its edges (`gpu_summary`).
        A metric never reported is None.
        """
        result: dict[int, dict[str, float | int | None]] = {}
        for device, bucket in sorted(self.gpu_summary(start_ns, end_ns).items()):
            entry: dict[str, float | int | None] = {"samples": bucket.samples}
            entry.update((m, bucket.mean(m)) for m in schema.GPU_COLUMNS[2:])
            result[device] = entry
        return result

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._db.close()

    def __enter__(self) -> Recording:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
