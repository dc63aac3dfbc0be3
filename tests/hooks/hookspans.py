"""Helpers for the hooks' tests: a recording sink, a clock moved by hand, a small Keras model."""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from gpuwhy.hooks import emitter
from gpuwhy.model import Event, Span, SpanKind
from gpuwhy.wire import decode


class Collected:
    """Everything the emitter delivered, with helpers to select spans."""

    def __init__(self) -> None:
        self.records: list[Span | Event] = []

    def __call__(self, batch: list[Span | Event]) -> None:
        self.records.extend(batch)

    def spans(self, kind: SpanKind | None = None, phase: str | None = None) -> list[Span]:
        emitter.flush(5.0)
        found = [r for r in self.records if isinstance(r, Span)]
        if kind is not None:
            found = [s for s in found if s.kind is kind]
        if phase is not None:
            found = [s for s in found if s.phase == phase]
        return sorted(found, key=lambda s: (s.start_ns, s.end_ns))

    def events(self, kind: str | None = None) -> list[Event]:
        emitter.flush(5.0)
        return [r for r in self.records if isinstance(r, Event) and kind in (None, r.kind)]


class FakeClock:
    """A monotonic clock the test advances by hand (nanoseconds)."""

    def __init__(self, start_ns: int = 1_000_000_000) -> None:
        self.now = start_ns

    def __call__(self) -> int:
        return self.now

    def advance_ms(self, ms: float) -> int:
        self.now += int(ms * 1e6)
        return self.now


def durations_ms(spans: list[Span]) -> list[float]:
    return [round((s.end_ns - s.start_ns) / 1e6, 3) for s in spans]


class LineServer:
    """A real Unix-socket listener that decodes the wire lines every connection sends."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="gw")
        self.path = str(Path(self._dir, "s.sock"))
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(8)
        self.lines: list[bytes] = []
        self.connections = 0
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            self._open.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while chunk := conn.recv(65536):
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                with self._lock:
                    self.lines.extend(complete)

    def records(self) -> list[object]:
        with self._lock:
            return [decode(line) for line in self.lines]

    def wait_for(self, count: int, timeout_s: float = 10.0) -> list[object]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and len(self.lines) < count:
            time.sleep(0.01)
        return self.records()

    def close(self) -> None:
        """Stop listening and hang up on every client (as a crashed `gpuwhy run` would)."""
        self.server.close()
        for conn in self._open:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        shutil.rmtree(self._dir, ignore_errors=True)


def step_waits(waits: list[Span]) -> list[Span]:
    """The waits of steps for their batch (an end-of-data wait covers no step: steps == 0)."""
    return [w for w in waits if w.steps > 0]


def end_of_data_waits(waits: list[Span]) -> list[Span]:
    """The waits of a plain loop for its input to say "no more", one per loop."""
    return [w for w in waits if w.steps == 0]


def small_classifier(keras: Any, steps_per_execution: int = 1) -> Any:
    """Dense 8-1 over 4 features, compiled, seeded: on Keras 3 (`keras`) or Keras 2 (`tf_keras`)."""
    keras.utils.set_random_seed(0)
    m = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(8, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    m.compile("adam", "binary_crossentropy", steps_per_execution=steps_per_execution)
    return m
