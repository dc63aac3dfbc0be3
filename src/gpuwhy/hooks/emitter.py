"""The in-process span buffer and the thread that delivers it.

The training thread only appends to a deque (O(1), no lock: `deque.append` is atomic under the
GIL); it never formats, does I/O or touches a device. A daemon flusher thread drains the deque at
most every `FLUSH_INTERVAL_S`, turns the raw hook records into `Span`s (`attribution.py`) and hands
them to the configured sink, also at interpreter exit and on `flush()`. Nothing here raises into
user code: a failing sink costs its records (counted in `stats()`), never the job.

Fork: a forked child (a DataLoader worker, say) gets a fresh, empty buffer, no flusher until it
emits, and a new connection to the same socket; in-process sinks are not carried into children.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from gpuwhy.hooks import attribution
from gpuwhy.model import Event, Span
from gpuwhy.rank_identity import identify
from gpuwhy.wire import ENV_SOCKET, PROCESS_EVENT, RETRACE_EVENT, encode, span_line

FLUSH_INTERVAL_S = 0.2
"""Longest time a record waits in the buffer before the flusher delivers it."""

MAX_PENDING = 200_000
"""Records held while the sink lags; beyond that new records are dropped and counted."""

SEND_TIMEOUT_S = 5.0
"""A socket that accepts nothing for this long is given up (the job goes on without it)."""

Sink = Callable[[Sequence[Any]], None]
"""Takes the records of a delivery: `Span`s and `Event`s; a sink with a true `wire_lines`
attribute (the socket's) is given each span already as its line (`wire.span_line`)."""
Poller = Callable[[], list[tuple[int, int]]]
Sampler = Callable[[int], list[Event]]

_buffer: deque[Any] = deque()
_accepting = False  # a sink is configured: keep what is emitted
_needs_thread = False  # accepting, but no flusher runs yet (first use, or after fork)
_sink: Sink | None = None
_thread: threading.Thread | None = None
_wake = threading.Event()
_lock = threading.Lock()  # one delivery at a time (flusher, flush(), atexit)
_attributor = attribution.Attributor()
_pollers: list[Poller] = []
_sampler: Sampler | None = None  # readings taken at each delivery (core_waits.py)
_pid = os.getpid()
_counts = {"emitted": 0, "delivered": 0, "dropped": 0}
_reported: set[str] = set()
_atexit_registered = False
_exit_hooks: list[Callable[[], None]] = []


def emit(record: Span | Event | tuple[Any, ...]) -> None:
    """Queue a record (or a raw hook tuple) for delivery: O(1); never raises, never blocks."""
    global _needs_thread
    if _accepting:
        if len(_buffer) < MAX_PENDING:
            _buffer.append(record)
        else:
            _counts["dropped"] += 1
        if _needs_thread and not sys.is_finalizing():
            # (Once the interpreter finalizes, a new thread never runs and starting one waits
            # for it forever; what is emitted then is never delivered anyway.)
            _needs_thread = False
            _start_thread()


def configure(sink: Sink | None) -> None:
    """Send batches to `sink` from now on (None: drop everything).

    The flusher thread starts with the first record emitted, so a process that never emits
    costs nothing.
    """
    global _sink, _accepting, _needs_thread, _atexit_registered
    with _lock:
        old, _sink = _sink, sink
        _attributor.span = _span_maker(sink)
        _accepting = sink is not None
        _needs_thread = _accepting and (_thread is None or not _thread.is_alive())
        if not _accepting:
            _buffer.clear()
    if isinstance(old, SocketSink) and old is not sink:
        old.close()
    if not _atexit_registered:
        _atexit_registered = True
        atexit.register(finish)


def connect_socket(path: str) -> bool:
    """Deliver to `gpuwhy run`'s Unix socket at `path` (wire.py lines); False if unreachable."""
    sink = SocketSink(path)
    if not sink.connect():
        return False
    configure(sink)
    return True


def add_poller(poller: Poller) -> None:
    """Register a source of in-graph data pulls (monotonic (request_ns, delivery_ns) pairs).

    The flusher calls it after each drain, so every pull made before a step closed is seen
    together with that step.
    """
    if poller not in _pollers:
        _pollers.append(poller)


def set_sampler(sampler: Sampler | None) -> None:
    """Have each delivery call `sampler(now_ns)` and send the Events it returns (None: stop).
    It runs on the delivering thread, never the training thread's time; a forked child has
    none."""
    global _sampler
    _sampler = sampler


def on_exit(hook: Callable[[], None]) -> None:
    """Run `hook` at interpreter exit, before the final delivery (first registered, first run)."""
    _exit_hooks.append(hook)


def flush(timeout_s: float = 1.0) -> None:
    """Deliver everything emitted so far, waiting at most about `timeout_s` for the sink."""
    if _lock.acquire(timeout=max(timeout_s, 0.0)):
        try:
            _deliver(final=False, counts=True)
        finally:
            _lock.release()


def stats() -> dict[str, int]:
    """Counts since start: records emitted into the buffer, delivered, and dropped."""
    return {**_counts, "pending": len(_buffer)}


def report_once(key: str, message: str, *, kind: str = "hook", **data: Any) -> None:
    """Emit one `Event` per `key`: a hook failed or could not apply (once, never raising)."""
    if key in _reported:
        return
    _reported.add(key)
    emit(Event(t_ns=time.monotonic_ns(), kind=kind, message=message, data={"key": key, **data}))


def guarded(prefix: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorator for a framework callback method: an exception inside it is reported once
    (`report_once`) and swallowed, so a hook can never break the training it watches."""

    def wrap(method: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(method)
        def run(*args: Any, **kwargs: Any) -> None:
            try:
                method(*args, **kwargs)
            except Exception as error:
                report_once(f"{prefix}.{method.__name__}", f"{prefix} hook failed: {error!r}")

        return run

    return wrap


def retrace(start_ns: int, duration_ns: int, function: str, message: str) -> None:
    """Send a call that traced or compiled a step function again (`wire.RETRACE_EVENT`): the
    one payload hooks/tf_traces.py, jax_compiles.py and torch_compiles.py send."""
    data = {"duration_ns": duration_ns, "function": function, "pid": pid()}
    emit(Event(t_ns=start_ns, kind=RETRACE_EVENT, message=message, data=data))


def pid() -> int:
    """This process's id, kept current across fork without a system call per use."""
    return _pid


def process_event() -> Event:
    """This process as a connection introduces it: pid, parent, and its rank where a launcher
    (torchrun, MPI, SLURM, TF_CONFIG) gave it one."""
    data: dict[str, Any] = {"pid": os.getpid(), "ppid": os.getppid()}
    try:
        identity = identify(os.environ)
    except Exception:  # never let a strange environment cost the job its connection
        identity = None
    if identity is not None:
        data.update(identity.to_data())
    return Event(time.monotonic_ns(), PROCESS_EVENT, "process connected", data)


# ---------------------------------------------------------------------------------- delivery


def _start_thread() -> None:
    global _thread
    try:
        _thread = threading.Thread(target=_run, name="gpuwhy-flusher", daemon=True)
        _thread.start()
    except RuntimeError:  # no thread to be had: records wait for flush() and exit
        _thread = None


def _run() -> None:
    while True:
        _wake.wait(FLUSH_INTERVAL_S)
        _wake.clear()
        with _lock:
            _deliver(final=False)


def _deliver(*, final: bool, counts: bool = False) -> None:
    """Drain, attribute and send; the caller holds `_lock`. Swallows every error, counting.

    `counts`: also send the sync counts summed so far (`flush()`), not only when they are due.
    """
    items: list[Any] = []
    pop = _buffer.popleft
    try:
        while True:
            items.append(pop())
    except IndexError:
        pass
    pulls: list[tuple[int, int]] = []
    for poller in list(_pollers):
        try:
            pulls.extend(poller())
        except Exception as error:  # a broken poller must not stop delivery
            _pollers.remove(poller)
            report_once("poller", f"data-wait poller failed: {error!r}")
    _counts["emitted"] += len(items)
    records: list[Span | Event]
    now = time.monotonic_ns()
    try:
        records = _attributor.feed(items, pulls, now, _pid, counts=counts)
        if final:
            records.extend(_attributor.finish(_pid))
    except Exception as error:
        _counts["dropped"] += len(items)
        report_once("attribution", f"span attribution failed: {error!r}")
        return
    sampler = _sampler
    if sampler is not None and _accepting:
        try:
            records.extend(sampler(now))
        except Exception as error:  # a broken reading must not stop delivery
            set_sampler(None)
            report_once("sampler", f"core-wait sampling failed: {error!r}")
    if not records:
        return
    sink = _sink
    if sink is None:
        _counts["dropped"] += len(records)
        return
    try:
        sink(records)
        _counts["delivered"] += len(records)
    except Exception:
        _counts["dropped"] += len(records)


def _span_maker(sink: Sink | None) -> Callable[..., Any]:
    return span_line if getattr(sink, "wire_lines", False) else Span


def finish() -> None:
    """Interpreter exit, or a job about to leave by `os._exit`: exit hooks, the last delivery,
    the socket closed. Records emitted afterwards are not delivered."""
    for hook in _exit_hooks:
        with contextlib.suppress(Exception):  # exit must go on whatever a hook does
            hook()
    if _lock.acquire(timeout=1.0):
        try:
            _deliver(final=True)
        finally:
            _lock.release()
    if _counts["dropped"] and isinstance(_sink, SocketSink) and _sink.alive:
        message = (
            f"{_counts['dropped']} of the job's hook records were dropped: its steps are incomplete"
        )
        _sink([Event(time.monotonic_ns(), "hook", message, dict(_counts))])
    if isinstance(_sink, SocketSink):
        _sink.close()


class SocketSink:
    """Writes records as wire.py JSON lines to a Unix stream socket; dead after one failure."""

    wire_lines = True  # spans come as their lines already

    def __init__(self, path: str, *, timeout_s: float = SEND_TIMEOUT_S) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self.alive = True
        self._sock: socket.socket | None = None

    def connect(self) -> bool:
        """Open the connection now; False (and dead) if nobody listens at `path`."""
        sock = None
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout_s)
            sock.connect(self.path)
        except OSError:
            self.alive = False
            if sock is not None:
                sock.close()
            return False
        self._sock = sock
        try:  # first, who is speaking: the analysis groups this process's records by it
            sock.sendall(encode(process_event()), getattr(socket, "MSG_NOSIGNAL", 0))
        except OSError:
            self.close()
            return False
        return True

    def __call__(self, records: Sequence[Span | Event | bytes]) -> None:
        if not self.alive:
            raise ConnectionError("socket closed")
        if self._sock is None and not self.connect():
            raise ConnectionError(f"cannot connect to {self.path}")
        assert self._sock is not None
        data = b"".join(r if isinstance(r, bytes) else encode(r) for r in records)
        try:
            # MSG_NOSIGNAL: a reader that went away must not kill the job with SIGPIPE.
            self._sock.sendall(data, getattr(socket, "MSG_NOSIGNAL", 0))
        except OSError:
            self.close()
            raise

    def close(self) -> None:
        self.alive = False
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None


# ---------------------------------------------------------------------------------- fork


def _after_fork_in_child() -> None:
    """A child starts clean: its parent's records, thread, lock and connection are not its own."""
    global _buffer, _wake, _lock, _thread, _sink, _accepting, _needs_thread, _pid, _attributor
    _pid = os.getpid()
    _buffer = deque()
    _wake = threading.Event()
    _lock = threading.Lock()
    _thread = None
    _pollers.clear()  # in-graph pollers read framework state that does not survive fork
    set_sampler(None)  # it reads the parent's thread; a worker is not where steps run
    for key in _counts:
        _counts[key] = 0
    parent_sink = _sink
    if isinstance(parent_sink, SocketSink) and parent_sink.alive:
        parent_sink.close()  # this process's copy of the descriptor; the parent's stays open
        _sink = SocketSink(parent_sink.path, timeout_s=parent_sink.timeout_s)  # lazy connect
    else:
        _sink = None
    _attributor = attribution.Attributor(span=_span_maker(_sink))
    _accepting = _sink is not None
    _needs_thread = _accepting


os.register_at_fork(after_in_child=_after_fork_in_child)


def _configure_from_environment() -> None:
    """Under `gpuwhy run` (GPUWHY_SOCKET set), deliver to its socket: the job's own
    `gpuwhy.phase()`/`step()` calls are recorded even with auto-instrumentation off."""
    path = os.environ.get(ENV_SOCKET)
    if path:
        configure(SocketSink(path))  # connects on the first delivery


_configure_from_environment()
