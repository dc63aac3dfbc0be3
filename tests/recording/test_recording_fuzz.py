"""Damaged recordings through `gpuwhy report`, many shapes at once: every one ends in a report
(0 or 1) or in one line and exit 2 — never a traceback, never an internal error (70).

Shapes: cut at random places, random bytes over random pages, bits flipped in the header,
another recording's write-ahead log beside it, and a recording still being written. The seed is
fixed, so a failure names a case that reproduces.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

import gpuwhy.cli
from gpuwhy.model import GpuSample, HostSample, Span, SpanKind
from gpuwhy.recording import RecordingWriter

PAGE = 4096


def _recording(path: Path, seconds: int = 240, *, close: bool = True) -> RecordingWriter:
    """A small real recording: two GPUs and the host at 10 Hz, phases and steps."""
    writer = RecordingWriter(path, flush_interval_s=0.05)
    for tick in range(seconds * 10):
        t = 10**9 + tick * 10**8
        for device in (0, 1):
            writer.put(
                GpuSample(
                    t,
                    device,
                    util_gpu_pct=(tick * 7 + device) % 101,
                    memory_used_bytes=2**30 + tick,
                )
            )
        writer.put(HostSample(t, cpu_system_pct=12.5, job_cpu_pct=99.0))
        if tick % 5 == 0:
            writer.put(Span("train", SpanKind.STEP, t, t + 4 * 10**8, tick // 5, 1, 7))
    writer.put(Span("train", SpanKind.PHASE, 10**9, 10**9 + seconds * 10**9))
    writer.flush()
    if close:
        writer.close()
    return writer


def _report(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = gpuwhy.cli.main(["report", str(path)])
    return code, capsys.readouterr().err


def _damaged(good: Path, folder: Path, rng: random.Random) -> list[tuple[str, Path]]:
    data = good.read_bytes()
    cases: list[tuple[str, bytes]] = []
    for _ in range(15):
        cut = rng.randrange(1, len(data))
        cases.append((f"cut at {cut}", data[:cut]))
    for _ in range(15):
        page = rng.randrange(1, len(data) // PAGE)
        start = page * PAGE + rng.randrange(PAGE - 64)
        noise = bytes(rng.randrange(256) for _ in range(rng.choice((8, 64, 512))))
        cases.append((f"noise in page {page}", data[:start] + noise + data[start + len(noise) :]))
    for _ in range(10):
        at = rng.randrange(100)
        flipped = bytearray(data)
        flipped[at] ^= 1 << rng.randrange(8)
        cases.append((f"header bit flipped at {at}", bytes(flipped)))
    written = []
    for number, (name, content) in enumerate(cases):
        target = folder / f"case{number}.gpuwhy.db"
        target.write_bytes(content)
        written.append((name, target))
    return written


@pytest.mark.slow
def test_damaged_recordings_end_in_a_report_or_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.gpuwhy.db"
    _recording(good)
    assert _report(good, capsys)[0] in (0, 1)
    outcomes: dict[str, list[str]] = {"report": [], "refused": []}
    for name, path in _damaged(good, tmp_path, random.Random(20261125)):
        code, err = _report(path, capsys)
        assert code in (0, 1, 2), f"{name}: exit {code}: {err[-500:]}"
        assert "Traceback" not in err, name
        if code == 2:
            assert err.count("\n") == 1 and err.startswith("gpuwhy: "), f"{name}: {err}"
            outcomes["refused"].append(name)
        else:
            outcomes["report"].append(name)
    assert outcomes["refused"], outcomes  # the damage is real: some files cannot be read


def test_another_recordings_wal_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "a.gpuwhy.db", tmp_path / "b.gpuwhy.db"
    _recording(first, 30)
    live = _recording(second, 40, close=False)  # its -wal file exists while it is open
    try:
        wal = Path(f"{second}-wal")
        assert wal.exists()
        shutil.copyfile(wal, f"{first}-wal")
        code, err = _report(first, capsys)
        assert code in (0, 1, 2) and "Traceback" not in err
        assert code != 2 or err.count("\n") == 1, err
    finally:
        live.close()


def test_a_recording_still_being_written_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "live.gpuwhy.db"
    live = _recording(path, 60, close=False)
    try:
        code, err = _report(path, capsys)
        assert code in (0, 1), err
    finally:
        live.close()
