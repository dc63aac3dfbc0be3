"""The on-disk layout of a recording: one SQLite file, versioned, integer columns.

Size is what matters at scale (24 h × 8 GPUs × 10 Hz ≈ 7 M GPU rows): every sample table is a
`WITHOUT ROWID` table clustered on its time key, so rows are appended in time order, packed
densely, and a time-range read is a B-tree seek followed by a sequential scan — no separate
index and no rowid to pay for. Values are integers (SQLite stores small integers in 1–3 bytes and
NULL in none); host CPU percentages are stored in tenths of a percent, which is exactly the
precision psutil reports them in.

The file says what it is twice: `PRAGMA application_id` (so a foreign SQLite file is told apart
without reading a table) and `PRAGMA user_version` (the schema version, so a newer file is
refused with a clear message instead of being misread).
"""

from __future__ import annotations

import os
import sqlite3

from gpuwhy.errors import RecordingError

SCHEMA_VERSION = 1
"""Version of this layout. Bump it (and teach the reader) on any incompatible change."""

APPLICATION_ID = 0x67707779  # "gpwy" in ASCII: marks the SQLite file as a gpuwhy recording
FILE_SUFFIX = ".gpuwhy.db"

# Column order of each sample table; the reader builds records positionally from these, so the
# order must match the record's field order (tests/recording checks it against model.py).
GPU_COLUMNS = (
    "t_ns",
    "device",
    "util_gpu_pct",
    "util_mem_pct",
    "memory_used_bytes",
    "sm_clock_mhz",
    "power_mw",
    "temperature_c",
    "pcie_tx_kbps",
    "pcie_rx_kbps",
    "pcie_gen",
    "pcie_width",
    "clock_event_reasons",
    "sm_active_permille",
    "sm_occupancy_permille",
    "tensor_active_permille",
    "dram_active_permille",
    "job_memory_bytes",
    "job_sm_pct",
)
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
    # (t_ns, device) is unique: a source reads each device once per tick.
    f"""CREATE TABLE gpu_samples (
    {_int_columns(GPU_COLUMNS, ("t_ns", "device"))},
    PRIMARY KEY (t_ns, device)
) WITHOUT ROWID""",
    f"""CREATE TABLE util_samples (
    {_int_columns(UTIL_COLUMNS, UTIL_COLUMNS)},
    PRIMARY KEY (t_ns, device, kind)
) WITHOUT ROWID""",
    f"""CREATE TABLE host_samples (
    {_int_columns(HOST_COLUMNS, ("t_ns",))},
    PRIMARY KEY (t_ns)
) WITHOUT ROWID""",
    # Phase names are user text repeated on every step span: stored once, referenced by id.
    "CREATE TABLE phases (id INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL UNIQUE)",
    # Spans arrive at their end, not in start order, and several processes may start one at the
    # same nanosecond: a rowid table with two indexes (all spans by start; one kind by start),
    # both in start order so every query streams without a sort.
    f"""CREATE TABLE spans (
    {_int_columns(SPAN_COLUMNS, ("start_ns", "duration_ns", "kind", "phase_id", "steps"))}
)""",
    "CREATE INDEX spans_by_start ON spans (start_ns)",
    "CREATE INDEX spans_by_kind ON spans (kind, start_ns)",
    """CREATE TABLE events (
    t_ns INTEGER NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    data TEXT NOT NULL
)""",
    "CREATE INDEX events_by_time ON events (t_ns)",
)
"""Statements that create an empty recording of SCHEMA_VERSION."""

TABLES = ("meta", "devices", "gpu_samples", "util_samples", "host_samples", "phases", "spans",
          "events")


def insert_sql(table: str, columns: tuple[str, ...], *, or_ignore: bool = False) -> str:
    """An INSERT statement with one placeholder per column."""
    verb = "INSERT OR IGNORE" if or_ignore else "INSERT"
    return f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def create_empty(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """Create a new recording file with the current schema; RecordingError if it exists."""
    target = os.fspath(path)
    try:
        # O_EXCL: never overwrite someone's file, even if it appears between check and create.
        os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError as error:
        raise RecordingError(f"recording {target} already exists",
                             "choose another path or delete the old file") from error
    except OSError as error:
        raise RecordingError(f"cannot create recording {target}: {error.strerror}",
                             "check that the folder exists and is writable") from error
    connection = sqlite3.connect(target, check_same_thread=False, isolation_level=None)
    try:
        # Identity and tables are written in rollback mode, so the main file carries them even if
        # the process dies before the first WAL checkpoint.
        connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("BEGIN")
        for statement in DDL:
            connection.execute(statement)
        connection.execute("COMMIT")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.Error as error:
        connection.close()
        raise RecordingError(f"cannot create recording {target}: {error}",
                             "check free disk space and permissions") from error
    return connection
