"""The line protocol that carries records from an instrumented job to `gpuwhy run`.

`gpuwhy run` listens on a Unix stream socket and names it in the job's environment
(`GPUWHY_SOCKET`); every Python process of the job that loads the hooks connects once and sends
one JSON object per line. JSON because phase names are user text; the volume is small (one line
per step or per flush of several steps), and the training thread never formats it: the hooks'
flusher thread does.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from gpuwhy.model import Event, Record, Span, SpanKind

ENV_SOCKET = "GPUWHY_SOCKET"
"""Path of the Unix socket `gpuwhy run` listens on."""

ENV_PROFILE = "GPUWHY_PROFILE"
"""`gpuwhy run --profile`: "SKIP:STEPS:DIR", the profiler window the job's hooks open."""

PROFILE_EVENT = "profile_window"
"""The event a job's hooks send when its profiler window closed (bounds, trace path)."""

ENV_TRY = "GPUWHY_TRY"
"""`gpuwhy try`: JSON naming the fixes one run applies and its step budget (hooks/try_fixes.py)."""

TRY_SEEN_EVENT = "try_seen"
"""What a trial run's hooks saw: loaders, maps and compiles made, where, and the fixes applied."""

TRY_STOPPED_EVENT = "try_stopped"
"""A trial run stopped itself after its budget of steps."""

PROCESS_EVENT = "process"
"""Sent once by every process that connects: its pid, parent and rank (rank_identity.py)."""

INPUT_EVENT = "input"
"""How a loop's input is made, sent as its iterator is made: a DataLoader's workers, a tf.data
pipeline's parallel stages (hooks/input_pipelines.py)."""

GC_EVENT = "gc"
"""A full garbage collection in a job's process: start, `duration_ns`, `pid` (gc_pauses.py)."""

RETRACE_EVENT = "retrace"
"""A call that traced or compiled a step function again in a job's process (a `tf.function`,
a jitted JAX function, a `torch.compile`d frame): start, `duration_ns`, `function`, `pid`
(hooks/tf_traces.py, jax_compiles.py, torch_compiles.py)."""

CORE_WAIT_EVENT = "core_wait"
"""A job process's main thread: its cumulative `run_ns` and `queued_ns` (time waiting for a core)
from Linux's scheduler statistics, and `pid` (hooks/core_waits.py)."""

COPY_EVENT = "pageable_copy"
"""A phase's host-to-device copies from pageable memory, summed over a few seconds: `phase`,
`count`, `ns` (the host's time blocked in them), `bytes`, `pid` (hooks/attribution.py)."""

ENV_RUN_ID = "GPUWHY_RUN_ID"
"""Identifies the run; a process whose environment lacks it is not under `gpuwhy run`."""

ENV_BOOT = "GPUWHY_BOOT"
"""Set to "0" to keep the auto-instrumentation out of the job (`gpuwhy run --no-hooks`)."""

ENV_CHAINED_SITECUSTOMIZE = "GPUWHY_CHAINED_SITECUSTOMIZE"
"""Internal: set while the boot module hands over to the user's own sitecustomize."""


class WireError(ValueError):
    """A line that is not a record of this protocol."""


_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)


@functools.lru_cache(maxsize=256)
def _json_bytes(text: object) -> bytes:
    """A phase name as a JSON string: a job has a handful, each sent once per step."""
    return _ENCODER.encode(str(text)).encode()


# A span's line, its fields put in by `%` on bytes: no str to encode, and each number turned
# to text by the format itself, not by a call of `int` (a line is made per step and per wait).
_SPAN_LINE = b'{"t":"span","phase":%b,"kind":%d,"s":%d,"e":%d,"step":%d,"n":%d,"pid":%d}\n'
_SPAN_LINE_OPEN = b'{"t":"span","phase":%b,"kind":%d,"s":%d,"e":%d,"step":%b,"n":%d,"pid":%b}\n'


def encode(record: Span | Event) -> bytes:
    """One record as one line of UTF-8 JSON (with the trailing newline).

    A span, one per step and wait, is written field by field (a few µs less per step on the
    hooks' flusher thread than a general encoder); an event, rare, by the JSON encoder.
    """
    if isinstance(record, Span):
        return span_line(*_span_fields(record))
    if isinstance(record, Event):
        obj: dict[str, Any] = {
            "t": "event",
            "ts": record.t_ns,
            "kind": record.kind,
            "msg": record.message,
            "data": dict(record.data),
        }
        return (_ENCODER.encode(obj) + "\n").encode()
    raise TypeError(f"cannot encode {type(record).__name__}")  # pragma: no cover - typed


def span_line(
    phase: str,
    kind: SpanKind,
    start_ns: int,
    end_ns: int,
    step: int | None = None,
    steps: int = 1,
    pid: int | None = None,
) -> bytes:
    """The line of the span these fields make, made without the `Span`: the hooks' flusher
    makes one or two per step for the socket, and a frozen dataclass costs ~0.8 µs to build."""
    # (inline, not a helper's two calls: a span is written per step and per wait)
    if step is not None and pid is not None:  # a step's or a wait's, from the hooks
        return _SPAN_LINE % (_json_bytes(phase), kind, start_ns, end_ns, step, steps, pid)
    step_text = b"null" if step is None else b"%d" % step
    pid_text = b"null" if pid is None else b"%d" % pid
    fields = (_json_bytes(phase), kind, start_ns, end_ns, step_text, steps, pid_text)
    return _SPAN_LINE_OPEN % fields


def _span_fields(span: Span) -> tuple[Any, ...]:
    return (span.phase, span.kind, span.start_ns, span.end_ns, span.step, span.steps, span.pid)


def decode(line: bytes | str) -> Record:
    """The record a line carries; raises `WireError` for anything else."""
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError) as error:
        raise WireError(f"not JSON: {line[:80]!r}") from error
    if not isinstance(obj, Mapping):
        raise WireError("not an object")
    try:
        if obj["t"] == "span":
            return Span(
                phase=str(obj["phase"]),
                kind=SpanKind(int(obj["kind"])),
                start_ns=int(obj["s"]),
                end_ns=int(obj["e"]),
                step=None if obj.get("step") is None else int(obj["step"]),
                steps=int(obj.get("n", 1)),
                pid=None if obj.get("pid") is None else int(obj["pid"]),
            )
        if obj["t"] == "event":
            data = obj.get("data") or {}
            return Event(
                t_ns=int(obj["ts"]),
                kind=str(obj["kind"]),
                message=str(obj.get("msg", "")),
                data=dict(data) if isinstance(data, Mapping) else {},
            )
    except (KeyError, TypeError, ValueError) as error:
        raise WireError(f"malformed record: {error}") from error
    raise WireError(f"unknown record type {obj.get('t')!r}")
