"""SpanListener: a real Unix socket, real client processes, the wire protocol end to end."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from gpuwhy.model import Event, Record, Span, SpanKind
from gpuwhy.runtime.listener import MAX_LINE_BYTES, SpanListener
from gpuwhy.wire import encode

SRC = Path(__file__).resolve().parents[2] / "src"


class Collected:
    def __init__(self) -> None:
        self.records: list[Record] = []
        self.lock = threading.Lock()

    def __call__(self, record: Record) -> None:
        with self.lock:
            self.records.append(record)


def _span(i: int, pid: int | None = None) -> Span:
    return Span("train", SpanKind.STEP, 1_000 * i, 1_000 * i + 500, step=i, pid=pid)


def _connect(path: str) -> socket.socket:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(path)
    return client


def test_records_from_one_client_arrive_in_order_and_the_socket_is_private() -> None:
    sink = Collected()
    listener = SpanListener(sink)
    path = listener.start()
    try:
        assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
        with _connect(path) as client:
            for i in range(100):
                client.sendall(encode(_span(i)))
            client.sendall(encode(Event(5, "hook", "keras patched", {"version": "3"})))
    finally:
        listener.stop()
    assert sink.records[:100] == [_span(i) for i in range(100)]
    assert sink.records[100] == Event(5, "hook", "keras patched", {"version": "3"})
    assert listener.stats.records == 101 and listener.stats.malformed == 0
    assert not os.path.exists(path) and not os.path.exists(os.path.dirname(path))


def test_malformed_and_overlong_lines_are_counted_and_skipped() -> None:
    sink = Collected()
    listener = SpanListener(sink)
    path = listener.start()
    try:
        with _connect(path) as client:
            client.sendall(b"not json\n")
            client.sendall(b'{"t": "span", "phase": "x"}\n')  # fields missing
            client.sendall(b"x" * (MAX_LINE_BYTES + 10))  # no newline yet: over the limit
            client.sendall(b"still the same long line\n")
            client.sendall(b"\n")  # empty lines are not records and not errors
            client.sendall(encode(_span(1)))
            # A line split across writes is reassembled.
            line = encode(_span(2))
            client.sendall(line[:7])
            time.sleep(0.05)
            client.sendall(line[7:])
    finally:
        listener.stop()
    assert sink.records == [_span(1), _span(2)]
    assert listener.stats.malformed == 3


def test_last_line_without_newline_is_kept_when_it_decodes() -> None:
    sink = Collected()
    listener = SpanListener(sink)
    path = listener.start()
    with _connect(path) as client:
        client.sendall(encode(_span(7)).rstrip(b"\n"))
    listener.stop()
    assert sink.records == [_span(7)]


def test_stop_drains_what_was_sent_before_it() -> None:
    sink = Collected()
    listener = SpanListener(sink)
    path = listener.start()
    client = _connect(path)
    client.sendall(b"".join(encode(_span(i)) for i in range(2000)))
    listener.stop()  # the client is still connected: what it sent must not be lost
    client.close()
    assert len(sink.records) == 2000


def test_stop_after_every_client_closed_does_not_wait_for_silence() -> None:
    """Connections at end-of-file (their processes exited with the job) end the drain at once;
    only a connection still open gets the 50 ms of silence."""
    durations = []
    for attempt in range(5):
        sink = Collected()
        listener = SpanListener(sink)
        path = listener.start()
        with _connect(path) as client:  # closed before stop, perhaps not even accepted yet
            client.sendall(b"".join(encode(_span(i)) for i in range(300)))
        start = time.monotonic()
        listener.stop()
        durations.append(time.monotonic() - start)
        assert sink.records == [_span(i) for i in range(300)], attempt
    assert min(durations) < 0.045, durations


_CLIENT = """
import os, socket, sys
from gpuwhy.model import Span, SpanKind
from gpuwhy.wire import encode
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(os.environ["GPUWHY_SOCKET"])
for i in range(int(sys.argv[1])):
    sock.sendall(encode(Span("train", SpanKind.STEP, i, i + 1, step=i, pid=os.getpid())))
sock.close()
"""


def test_several_client_processes_at_once() -> None:
    sink = Collected()
    listener = SpanListener(sink)
    path = listener.start()
    env = dict(os.environ, GPUWHY_SOCKET=path, PYTHONPATH=str(SRC))
    try:
        clients = [
            subprocess.Popen([sys.executable, "-c", _CLIENT, "500"], env=env) for _ in range(6)
        ]
        assert [client.wait(timeout=60) for client in clients] == [0] * 6
    finally:
        listener.stop()
    by_pid: dict[int | None, list[int | None]] = {}
    for record in sink.records:
        assert isinstance(record, Span)
        by_pid.setdefault(record.pid, []).append(record.step)
    assert set(by_pid) == {client.pid for client in clients}
    assert all(steps == list(range(500)) for steps in by_pid.values())
    assert listener.stats.connections == 6


def test_a_failing_sink_does_not_stop_the_listener() -> None:
    seen: list[Record] = []

    def sink(record: Record) -> None:
        if isinstance(record, Span) and record.step == 1:
            raise RuntimeError("boom")
        seen.append(record)

    listener = SpanListener(sink)
    path = listener.start()
    with _connect(path) as client:
        client.sendall(encode(_span(0)) + encode(_span(1)) + encode(_span(2)))
    listener.stop()
    assert [r.step for r in seen if isinstance(r, Span)] == [0, 2]


def test_stop_is_idempotent_and_stop_without_start_is_harmless() -> None:
    SpanListener(Collected()).stop()
    listener = SpanListener(Collected())
    listener.start()
    listener.stop()
    listener.stop()
