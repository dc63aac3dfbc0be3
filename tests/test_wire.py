"""The job-to-run line protocol: every record survives the trip, anything else is refused."""

from __future__ import annotations

import pytest

from gpuwhy.model import Event, Span, SpanKind
from gpuwhy.wire import WireError, decode, encode, span_line


@pytest.mark.parametrize(
    "record",
    [
        Span("train", SpanKind.STEP, 10, 25, step=3, steps=4, pid=77),
        Span("validation", SpanKind.PHASE, 1, 2),
        Span('my phase: "ünïcode"\n', SpanKind.WAIT, 5, 9, step=0),
        Event(123, "hook", "keras fit instrumented", {"steps_per_execution": 4}),
    ],
)
def test_every_record_round_trips_on_one_line(record: Span | Event) -> None:
    line = encode(record)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode(line) == record


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"t": "sample"}',
        b'{"t": "span", "phase": "x"}',
        b'{"t": "span", "phase": "x", "kind": 9, "s": 1, "e": 2}',
        b"\xff\xfe",
    ],
)
def test_anything_else_is_a_wire_error(line: bytes) -> None:
    with pytest.raises(WireError):
        decode(line)


@pytest.mark.parametrize(
    "span",
    [
        Span("train", SpanKind.STEP, 5, 9, 3, 2, 77),
        Span('va"l\n', SpanKind.WAIT, 1, 2, None, 0, None),
        Span("predict", SpanKind.PHASE, 0, 10),
    ],
)
def test_a_span_s_line_made_from_its_fields_is_the_span_s_own(span: Span) -> None:
    """The hooks' flusher writes a span's line straight from its fields (no `Span` built)."""
    fields = (span.phase, span.kind, span.start_ns, span.end_ns, span.step, span.steps, span.pid)
    assert span_line(*fields) == encode(span)
    assert decode(span_line(*fields)) == span
