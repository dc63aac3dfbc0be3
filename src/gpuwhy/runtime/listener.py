"""The Unix socket server that receives spans and events from the job's processes.

Every Python process of the job that loads the hooks (several ranks, DataLoader workers) connects
once to the socket named by ``GPUWHY_SOCKET`` and writes JSON lines (`gpuwhy.wire`). One selector
thread serves all connections: reading is non-blocking, a record goes straight to the sink (the
recording writer's O(1) `put`), and a malformed line is counted and skipped. Nothing here runs on
the sampler thread or waits on the job.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpuwhy.model import Record
from gpuwhy.wire import WireError, decode

MAX_LINE_BYTES = 1 << 20
"""A line longer than this is not a record of ours: it is dropped and counted as malformed."""

_READ_BYTES = 1 << 16
# AF_UNIX paths are limited to 108 bytes on Linux (sun_path); a long $TMPDIR falls back to /tmp.
_MAX_SOCKET_PATH = 100


@dataclass
class ListenerStats:
    """What the listener has seen so far (written by its thread, read by anyone)."""

    connections: int = 0
    records: int = 0
    malformed: int = 0


class _Connection:
    __slots__ = ("buffer", "discarding", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.discarding = False  # inside an over-long line: skip up to its newline


class SpanListener:
    """Serve the job's hook connections on a Unix socket in a private (0700) temporary folder.

    ``sink`` is called from the listener's thread only, once per decoded record.
    """

    def __init__(self, sink: Callable[[Record], None]) -> None:
        self._sink = sink
        self.stats = ListenerStats()
        self._dir: str | None = None
        self._server: socket.socket | None = None
        self._selector: selectors.BaseSelector | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._connections: dict[int, _Connection] = {}
        self._drain_s = 0.5
        self.path = ""

    def start(self) -> str:
        """Create the socket and start serving; returns its path (also ``.path``)."""
        if self._thread is not None:
            return self.path
        self._dir = _private_dir()
        self.path = os.path.join(self._dir, "hooks.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(self.path)
        server.listen(128)
        server.setblocking(False)
        self._server = server
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(server, selectors.EVENT_READ, "accept")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread = threading.Thread(target=self._serve, name="gpuwhy-listener", daemon=True)
        self._thread.start()
        return self.path

    def stop(self, drain_s: float = 0.5) -> None:
        """Read what the job already sent (at most ``drain_s``), then close everything.

        Idempotent. Connections of processes that outlive the job are closed; what they had
        written before this call is kept.
        """
        if self._thread is None or self._stopping.is_set():
            return
        self._drain_s = drain_s
        self._stopping.set()
        if self._wake_w is not None:
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")
        self._thread.join()
        self._close_all()

    # -- the listener thread -------------------------------------------------------------------

    def _serve(self) -> None:
        selector = self._selector
        assert selector is not None
        while not self._stopping.is_set():
            for key, _ in selector.select(timeout=None):
                self._handle(key)
        # Drain: everything that is readable now was sent before the job ended. A process that
        # has exited leaves its connection at end-of-file, so once none is open (and none waits
        # to be accepted) the drain is over at once; an open one gets 50 ms of silence.
        deadline = time.monotonic() + self._drain_s
        while time.monotonic() < deadline:
            timeout = 0.05 if self._connections else 0.0
            ready = [key for key, _ in selector.select(timeout=timeout) if key.data != "wake"]
            if not ready:
                break
            for key in ready:
                self._handle(key)

    def _handle(self, key: selectors.SelectorKey) -> None:
        if key.data == "accept":
            self._accept()
        elif key.data == "wake":
            with contextlib.suppress(OSError):
                self._wake_r.recv(64)  # type: ignore[union-attr]
        else:
            self._read(key.data)

    def _accept(self) -> None:
        assert self._server is not None and self._selector is not None
        while True:
            try:
                sock, _ = self._server.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. EMFILE: the job goes on without hooks for that process
            sock.setblocking(False)
            conn = _Connection(sock)
            self._connections[sock.fileno()] = conn
            self._selector.register(sock, selectors.EVENT_READ, conn)
            self.stats.connections += 1

    def _read(self, conn: _Connection) -> None:
        try:
            chunk = conn.sock.recv(_READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._finish(conn)
            return
        self._feed(conn, chunk)

    def _feed(self, conn: _Connection, chunk: bytes) -> None:
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                break
            if conn.discarding:
                conn.discarding = False
            else:
                conn.buffer += chunk[start:newline]
                self._deliver(bytes(conn.buffer))
            conn.buffer.clear()
            start = newline + 1
        if not conn.discarding:
            conn.buffer += chunk[start:]
            if len(conn.buffer) > MAX_LINE_BYTES:
                conn.buffer.clear()
                conn.discarding = True
                self.stats.malformed += 1

    def _deliver(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            record = decode(line)
        except WireError:
            self.stats.malformed += 1
            return
        self.stats.records += 1
        try:
            self._sink(record)
        except Exception:  # a failing sink must not stop the other connections
            self.stats.malformed += 1

    def _finish(self, conn: _Connection) -> None:
        # A last line without its newline: the writer was cut off; keep it if it still decodes.
        if conn.buffer and not conn.discarding:
            self._deliver(bytes(conn.buffer))
        conn.buffer.clear()
        self._forget(conn)

    def _forget(self, conn: _Connection) -> None:
        self._connections.pop(conn.sock.fileno(), None)
        if self._selector is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(conn.sock)
        conn.sock.close()

    def _close_all(self) -> None:
        for conn in list(self._connections.values()):
            self._finish(conn)
        for sock in (self._server, self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
        if self._selector is not None:
            self._selector.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


def _private_dir() -> str:
    """A fresh folder only this user can enter (mkdtemp makes it 0700), short enough for AF_UNIX."""
    path = tempfile.mkdtemp(prefix="gpuwhy-")
    if len(path) + len("/hooks.sock") <= _MAX_SOCKET_PATH:
        return path
    os.rmdir(path)
    return tempfile.mkdtemp(prefix="gpuwhy-", dir="/tmp")
