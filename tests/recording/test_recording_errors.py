"""Files that are not readable recordings: each gets one RecordingError line with a fix."""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

import pytest

from gpuwhy.errors import ExitCode, RecordingError
from gpuwhy.model import GpuSample, Span, SpanKind
from gpuwhy.recording import Recording, RecordingWriter


def _recording(path: Path, samples: int = 20_000) -> Path:
    writer = RecordingWriter(path)
    for t in range(samples):  # constructed values, enough to span many pages
        writer.put(GpuSample(t, t % 2, util_gpu_pct=t % 101, memory_used_bytes=t * 4096))
    writer.put(Span("train", SpanKind.PHASE, 0, samples))
    writer.close()
    return path


def _open_error(path: Path) -> RecordingError:
    with pytest.raises(RecordingError) as info, Recording.open(path) as rec:
        # Damage deep inside a file may only show while reading: that must be the same error.
        for _ in rec.gpu_samples():
            pass
    error = info.value
    line = error.one_line()
    assert "\n" not in line and error.fix, line
    assert error.exit_code == ExitCode.USAGE
    return error


def test_missing_file(tmp_path: Path) -> None:
    assert "no recording at" in _open_error(tmp_path / "nope.gpuwhy.db").message


def test_folder(tmp_path: Path) -> None:
    assert "is a folder" in _open_error(tmp_path).message


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.gpuwhy.db"
    path.write_bytes(b"")
    assert "empty" in _open_error(path).message


def test_random_bytes(tmp_path: Path) -> None:
    path = tmp_path / "noise.gpuwhy.db"
    path.write_bytes(random.Random(3).randbytes(64 * 1024))
    assert "not an SQLite file" in _open_error(path).message


def test_text_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("epoch 1 loss 0.3\n")
    assert "not a gpuwhy recording" in _open_error(path).message


def test_truncated_file(tmp_path: Path) -> None:
    path = _recording(tmp_path / "cut.gpuwhy.db")
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.truncate(size // 2)
    error = _open_error(path)
    assert "truncated" in error.message and str(size) in error.message


def test_truncated_inside_the_header(tmp_path: Path) -> None:
    path = _recording(tmp_path / "cut.gpuwhy.db", samples=10)
    with path.open("r+b") as handle:
        handle.truncate(40)
    assert "truncated" in _open_error(path).message


def test_corrupt_pages_inside(tmp_path: Path) -> None:
    path = _recording(tmp_path / "bad.gpuwhy.db")
    size = path.stat().st_size
    with path.open("r+b") as handle:  # overwrite the middle of the file with noise
        handle.seek(size // 3)
        handle.write(random.Random(5).randbytes(size // 3))
    assert "damaged" in _open_error(path).message


def test_foreign_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE meta (key TEXT, value TEXT)")
        db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    db.close()
    assert "SQLite database but not a gpuwhy recording" in _open_error(path).message


def test_newer_schema_version(tmp_path: Path) -> None:
    path = _recording(tmp_path / "future.gpuwhy.db", samples=10)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")
    db.close()
    error = _open_error(path)
    assert "newer gpuwhy" in error.message and "99" in error.message
    assert "pip install -U gpuwhy" in error.one_line()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files regardless of permissions")
def test_unreadable_file(tmp_path: Path) -> None:
    path = _recording(tmp_path / "secret.gpuwhy.db", samples=10)
    path.chmod(0)
    assert "cannot read" in _open_error(path).message
