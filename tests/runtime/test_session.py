"""Session: the real host source, a real socket and a real recording, finalised every time."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from gpuwhy.errors import RecordingError
from gpuwhy.model import Span, SpanKind
from gpuwhy.recording.reader import Recording
from gpuwhy.runtime.session import Session
from gpuwhy.wire import encode

RUN_META = {
    "gpuwhy_version",
    "start_wall_s",
    "start_ns",
    "end_ns",
    "exit_code",
    "hostname",
    "interval_s",
    "dropped",
}


def test_session_records_samples_and_spans_and_finalises(tmp_path: Path) -> None:
    path = tmp_path / "r.gpuwhy.db"
    session = Session(path, interval_s=0.05, job_pid=os.getpid(), listen=True)
    session.start()
    assert session.listener is not None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(session.listener.path)
        for i in range(10):
            client.sendall(encode(Span("train", SpanKind.STEP, i, i + 1, step=i)))
    time.sleep(1.3)  # the host source reads every 0.5 s, whatever the sampler's period
    session.stop(exit_code=0)
    assert session.errors == []
    assert session.steps.progress().steps_total == 10
    with Recording.open(path) as recording:
        assert recording.complete
        assert set(recording.meta) >= RUN_META
        assert recording.meta["exit_code"] == 0 and recording.meta["interval_s"] == 0.05
        assert recording.meta["hooks"] == {"connections": 1, "records": 10, "malformed": 0}
        assert len(list(recording.spans(kind=SpanKind.STEP))) == 10
        hosts = list(recording.host_samples())
    assert len(hosts) >= 2
    assert all(recording.meta["start_ns"] <= h.t_ns <= recording.meta["end_ns"] for h in hosts)
    assert any(h.job_rss_bytes for h in hosts)  # this process is the job: it has memory


def test_an_existing_file_is_refused_before_anything_starts(tmp_path: Path) -> None:
    path = tmp_path / "r.gpuwhy.db"
    path.write_bytes(b"keep me")
    session = Session(path, listen=True)
    with pytest.raises(RecordingError):
        session.start()
    assert session.listener is None and session.sampler is None
    assert path.read_bytes() == b"keep me"
    session.stop()  # harmless


def test_without_sources_the_recording_is_still_complete(tmp_path: Path) -> None:
    path = tmp_path / "r.gpuwhy.db"
    with Session(path, sources=[]) as session:
        session.set_meta("command", ["x"])
    session.stop()  # idempotent
    with Recording.open(path) as recording:
        assert recording.complete and recording.meta["command"] == ["x"]
        assert recording.meta["exit_code"] is None
        assert list(recording.host_samples()) == []
