"""The on-disk layout of a recording: one SQLite file, versioned, integer values.

Size is what matters at scale (24 h × 8 GPUs × 10 Hz ≈ 7 M GPU samples, 8 M buffered utilization
samples, 2 M spans). Format 1 stored a row per sample (80 bytes each: 550 MB for such a day).
Format 2 stores each stream (GPU, utilization, host samples; spans) in compressed columnar blocks,
one per minute of time and GPU (streams.py, codec.py), with per-1 s and per-1 min tiers of every
metric beside them (tiers.py); the minute still being written lives in plain staging rows, so a
crash loses at most the last flush. Host CPU percentages are stored in tenths of a percent, which
is exactly the precision psutil reports them in. Only format 2 is read:
format 1 predates any release, and the reader refuses it with a one-line message.

The file says what it is twice: `PRAGMA application_id` (so a foreign SQLite file is told apart
without reading a table) and `PRAGMA user_version` (the schema version, so a newer file is
refused with a clear message instead of being misread).
"""

from __future__ import annotations

import os
import sqlite3

from gpuwhy.errors import RecordingError
from gpuwhy.recording import streams

RECORDING_FORMAT_VERSION = 2
"""Version of this layout. Bump it (and teach the reader) on any incompatible change."""

APPLICATION_ID = 0x67707779  # "gpwy" in ASCII: marks the SQLite file as a gpuwhy recording
FILE_SUFFIX = ".gpuwhy.db"

# Field order of each record as stored (full rows, streams.py); the reader builds records
# positionally from these, so the order must match the record's field order (tests/recording
# checks it against model.py).
GPU_COLUMNS = ("t_ns", "device", *streams.GPU_METRICS)
UTIL_COLUMNS = ("t_ns", "device", "kind", "value_pct")
HOST_COLUMNS = (
    "t_ns",
    "cpu_system_permille",  # tenths of a percent of all cores (HostSample.cpu_system_pct × 10)
    "job_cpu_permille",  # tenths of a percent of one core (HostSample.job_cpu_pct × 10)
    "job_rss_bytes",
    "job_processes",
    "memory_available_bytes",
)
DEVICE_COLUMNS = (
    "idx",
    "name",
    "uuid",
    "pci_bus_id",
    "memory_total_bytes",
    "cc_major",
    "cc_minor",
    "sm_clock_max_mhz",
    "power_limit_mw",
    "pcie_gen_max",
    "pcie_width_max",
    "mig_mode",
    "gpm_supported",
)
SPAN_COLUMNS = ("start_ns", "duration_ns", "kind", "phase_id", "step", "steps", "pid")
EVENT_COLUMNS = ("t_ns", "kind", "message", "data")


def _int_columns(names: tuple[str, ...], keys: tuple[str, ...]) -> str:
    return ",\n    ".join(f"{n} INTEGER{' NOT NULL' if n in keys else ''}" for n in names)


DDL = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID",
    f"""CREATE TABLE devices (
    idx INTEGER PRIMARY KEY NOT NULL,
    name TEXT NOT NULL,
    uuid TEXT,
    pci_bus_id TEXT,
    {_int_columns(DEVICE_COLUMNS[4:], ())}
)""",
    # Phase names are user text repeated on every step span: stored once, referenced by id.
    "CREATE TABLE phases (id INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL UNIQUE)",
    *(statement for spec in streams.STREAMS for statement in streams.ddl(spec)),
    """CREATE TABLE events (
    t_ns INTEGER NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    data TEXT NOT NULL
)""",
    "CREATE INDEX events_by_time ON events (t_ns)",
)
"""Statements that create an empty recording of RECORDING_FORMAT_VERSION."""

TABLES = (
    "meta",
    "devices",
    "phases",
    "events",
    *(spec.table(kind) for spec in streams.STREAMS for kind in ("staging", "blocks")),
    *(spec.table("tiers") for spec in streams.STREAMS if spec.tiered),
)


def insert_sql(table: str, columns: tuple[str, ...], *, or_ignore: bool = False) -> str:
    """An INSERT statement with one placeholder per column."""
    verb = "INSERT OR IGNORE" if or_ignore else "INSERT"
    return f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def probe(db: sqlite3.Connection) -> None:
    """Touch every B-tree of a format-2 recording (sqlite3.Error if one is damaged).

    Cheap (the block and tier tables hold one row per minute and GPU): a damaged page in the
    file's structure shows at open instead of halfway through an analysis.
    """
    tables = ["meta", "devices", "phases", "events"]
    tables += [spec.table(kind) for spec in streams.STREAMS for kind in ("staging", "blocks")]
    tables += [spec.table("tiers") for spec in streams.STREAMS if spec.tiered]
    for table in tables:
        db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
        db.execute(f"SELECT * FROM {table} LIMIT 1").fetchone()
    for spec in streams.STREAMS:
        db.execute(f"SELECT MAX(t_first) FROM {spec.table('blocks')}").fetchone()


_claims: set[str] = set()
"""Names this process claimed (`claim`) and has not yet written a recording into."""


def claim(path: str | os.PathLike[str]) -> bool:
    """Take a name for a recording written later: create it empty, exclusively. False if it
    exists. Two runs that pick a name in the same second in one folder then never pick the
    same one: the second finds the first's claim and moves on (runtime/paths.py)."""
    target = os.fspath(path)
    if not _create_exclusively(target):
        return False
    _claims.add(target)
    return True


def release(path: str | os.PathLike[str]) -> None:
    """Give back a claimed name no recording was written into (the run ended before it began)."""
    target = os.fspath(path)
    if target in _claims:
        _claims.discard(target)
        try:
            if os.path.getsize(target) == 0:
                os.unlink(target)
        except OSError:
            pass  # gone already, or not ours to remove: nothing is lost either way


def _created(target: str) -> bool:
    """Create `target` exclusively, or take over this process's own empty claim on it."""
    if target in _claims:
        _claims.discard(target)
        if os.path.getsize(target) == 0:
            return True
    return _create_exclusively(target)


def _create_exclusively(target: str) -> bool:
    """An empty file at `target`; False if one exists. O_EXCL: never overwrite someone's file,
    even if it appears between a check and the create."""
    try:
        os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    return True


def create_empty(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """Create a new recording file with the current schema; RecordingError if it exists (other
    than as this process's own claim)."""
    target = os.fspath(path)
    try:
        created = _created(target)
    except OSError as error:
        raise RecordingError(
            f"cannot create recording {target}: {error.strerror}",
            "check that the folder exists and is writable",
        ) from error
    if not created:
        raise RecordingError(
            f"recording {target} already exists", "choose another path or delete the old file"
        )
    connection = sqlite3.connect(target, check_same_thread=False, isolation_level=None)
    try:
        # Staging rows are deleted as their slot packs into a block: incremental vacuum lets
        # close() hand those pages back, so a finished file holds no dead pages. (Set first:
        # it can only be chosen before the file has content.)
        connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
        # Identity and tables are written in rollback mode, so the main file carries them even if
        # the process dies before the first WAL checkpoint.
        connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        connection.execute(f"PRAGMA user_version = {RECORDING_FORMAT_VERSION}")
        connection.execute("BEGIN")
        for statement in DDL:
            connection.execute(statement)
        connection.execute("COMMIT")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.Error as error:
        connection.close()
        raise RecordingError(
            f"cannot create recording {target}: {error}", "check free disk space and permissions"
        ) from error
    return connection
