"""The emitter: delivery, the socket, failures that must not reach the job, fork."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import pytest
from hookspans import Collected, LineServer

from gpuwhy.hooks import emitter
from gpuwhy.model import Event, Span, SpanKind
from gpuwhy.rank_identity import RankIdentity
from gpuwhy.wire import PROCESS_EVENT


@pytest.fixture
def server() -> Iterator[LineServer]:
    srv = LineServer()
    yield srv
    emitter.flush(2.0)
    emitter.configure(None)
    srv.close()


def span(i: int) -> Span:
    return Span("train", SpanKind.STEP, i, i + 1, step=i)


def test_the_flusher_delivers_without_being_asked(collected: Collected) -> None:
    emitter.emit(span(1))
    deadline = time.monotonic() + 5
    while not collected.records and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [r.step for r in collected.records] == [1]  # type: ignore[union-attr]
    assert collected.records[0].pid == os.getpid()  # type: ignore[union-attr]


def test_a_failing_sink_never_reaches_the_caller() -> None:
    def broken(batch: object) -> None:
        raise RuntimeError("disk full")

    emitter.configure(broken)
    before = emitter.stats()["dropped"]
    for i in range(10):
        emitter.emit(span(i))  # must not raise
    emitter.flush()
    assert emitter.stats()["dropped"] - before == 10
    emitter.configure(None)


def test_records_beyond_the_bound_are_dropped_and_counted(
    monkeypatch: pytest.MonkeyPatch, collected: Collected
) -> None:
    monkeypatch.setattr(emitter, "MAX_PENDING", 3)
    emitter.flush()
    with emitter._lock:  # hold the flusher off while filling the buffer
        before = emitter.stats()["dropped"]
        for i in range(5):
            emitter.emit(span(i))
        assert emitter.stats()["dropped"] - before == 2


def test_socket_sink_sends_wire_lines(server: LineServer) -> None:
    assert emitter.connect_socket(server.path)
    emitter.emit(span(3))
    emitter.emit(Event(5, "hook", "hello", {"a": 1}))
    emitter.flush()
    records = server.wait_for(3)
    hello = records[0]  # a connection first says which process speaks
    assert isinstance(hello, Event) and hello.kind == PROCESS_EVENT
    assert hello.data["pid"] == os.getpid() and hello.data["ppid"] == os.getppid()
    assert records[1] == Span("train", SpanKind.STEP, 3, 4, step=3, pid=os.getpid())
    assert records[2] == Event(5, "hook", "hello", {"a": 1})


def test_a_process_under_a_launcher_names_its_rank(
    server: LineServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "GROUP_RANK": "1",
    }.items():
        monkeypatch.setenv(name, value)
    assert emitter.connect_socket(server.path)
    (hello,) = server.wait_for(1)
    assert isinstance(hello, Event)
    assert RankIdentity.from_data(hello.data) == RankIdentity(
        "torchrun", rank=3, world_size=4, local_rank=1, node=1, host=socket.gethostname()
    )


def test_connect_to_nothing_returns_false() -> None:
    assert emitter.connect_socket("/nonexistent/gpuwhy.sock") is False


def test_a_dead_socket_drops_records_and_the_job_goes_on(server: LineServer) -> None:
    assert emitter.connect_socket(server.path)
    emitter.emit(span(1))
    emitter.flush()
    server.wait_for(1)
    server.close()
    time.sleep(0.1)
    before = emitter.stats()["dropped"]
    for i in range(6):  # the reader is gone: sends fail (EPIPE), nothing raises here
        emitter.emit(span(10 + i))
        emitter.flush()
    assert emitter.stats()["dropped"] - before >= 5  # at most one batch sat in a buffer


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_sends_its_own_records_once(server: LineServer) -> None:
    assert emitter.connect_socket(server.path)
    emitter.emit(span(1))  # parent, before the fork (maybe still buffered when it forks)
    pid = os.fork()
    if pid == 0:  # the child: a fresh buffer and its own connection
        try:
            emitter.emit(span(2))
            emitter.flush(2.0)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    emitter.emit(span(3))
    emitter.flush()
    server.wait_for(5)
    time.sleep(0.2)
    records = [r for r in server.records() if isinstance(r, Span)]
    hellos = [r.data["pid"] for r in server.records() if isinstance(r, Event)]
    assert sorted(hellos) == sorted([os.getpid(), pid])  # each connection introduced itself
    by_step = sorted((r.step, r.pid) for r in records)  # type: ignore[union-attr]
    assert by_step == [(1, os.getpid()), (2, pid), (3, os.getpid())]
    assert server.connections == 2
