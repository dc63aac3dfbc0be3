"""The array-based phase statistics agree exactly with the span-by-span reference.

`recording_phase_stats`, given a recording's span columns or constructed spans (as columns of
one span each), is checked against reference_phases.py on captured recordings
(tests/data/recordings), synthetic ones (tests/support/synth: constructed data shaped like a
training run, labelled so) and
constructed spans with every awkward case: overlapping and nested steps, waits inside steps,
steps of N steps, processes, zero waits, untimed steps, steps outside their phase's spans.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import reference_phases
from constructed import phase_stats

from gpuwhy.analysis.phases import recording_phase_stats
from gpuwhy.model import Span, SpanKind
from gpuwhy.recording import Recording, RecordingWriter
from support.synth import synthesize

MS = 1_000_000
S = 1_000_000_000
RECORDINGS = sorted((Path(__file__).parents[1] / "data" / "recordings").glob("*.gpuwhy.db"))


def _same(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for name, phase in want.items():
        assert got[name] == phase, name
        assert got[name].intervals == phase.intervals, name  # not part of ==
        assert got[name].resume_s == phase.resume_s, name


def _random_spans(rng: random.Random) -> list[Span]:
    """A run of a few phases, processes and rounds, with the irregularities hooks produce."""
    spans: list[Span] = []
    t = rng.randrange(0, 50) * MS
    for _ in range(rng.randrange(1, 5)):  # rounds (epochs)
        for phase in rng.sample(["train", "validation", "predict"], rng.randrange(1, 3)):
            begin = t
            pids = rng.sample([None, 11, 12, 13], rng.randrange(1, 3))
            for pid in pids:
                u = begin + rng.randrange(0, 3) * MS
                last: Span | None = None
                for step in range(rng.randrange(0, 30)):
                    n = rng.choice((1, 1, 1, 4)) if rng.random() < 0.2 else 1
                    wait = rng.choice((0, 0, rng.randrange(1, 20) * MS, 300 * MS))
                    if rng.random() < 0.9:  # a timed step has its WAIT (zero when none)
                        spans.append(Span(phase, SpanKind.WAIT, u, u + wait, step, n, pid))
                    u += wait
                    length = rng.randrange(5, 80) * MS
                    if rng.random() < 0.05:  # a step that overlaps the previous one
                        u -= rng.randrange(1, 10) * MS
                    last = Span(phase, SpanKind.STEP, u, u + length, step, n, pid)
                    spans.append(last)
                    if rng.random() < 0.05:  # a wait inside the step
                        spans.append(Span(phase, SpanKind.WAIT, u + MS, u + 2 * MS, step, 1, pid))
                    u += length + rng.choice((0, 200_000, rng.randrange(1, 30) * MS))
                if last is not None and rng.random() < 0.4:  # the loop's wait for the data's end
                    ending = max(last.end_ns - rng.randrange(1, 20) * MS, last.start_ns)
                    spans.append(Span(phase, SpanKind.WAIT, ending, last.end_ns, last.step, 0, pid))
                t = max(t, u)
            if rng.random() < 0.85:  # a PHASE span, sometimes not covering every step
                cut = rng.choice((0, 0, 0, rng.randrange(1, 40) * MS))
                spans.append(Span(phase, SpanKind.PHASE, begin, t - cut))
            t += rng.randrange(0, 100) * MS
    if rng.random() < 0.3:
        spans.append(Span("train", SpanKind.PHASE, t, t))  # empty: ignored
        spans.append(Span("train", SpanKind.STEP, t + 5, t + 2))  # reversed: ignored
    rng.shuffle(spans)  # hooks report out of order (a wait after its step)
    return spans


@pytest.mark.parametrize("seed", range(60))
def test_random_spans_give_the_reference_statistics(seed: int) -> None:
    rng = random.Random(seed)
    spans = _random_spans(rng)
    end = max((s.end_ns for s in spans), default=0) + rng.randrange(0, 2) * S
    _same(phase_stats(spans, 0, end), reference_phases.phase_stats(spans, 0, end))


@pytest.mark.parametrize("seed", range(8))
def test_a_recording_read_as_columns_gives_the_reference_statistics(
    tmp_path: Path, seed: int
) -> None:
    spans = _random_spans(random.Random(1000 + seed))
    path = tmp_path / "spans.gpuwhy.db"
    writer = RecordingWriter(path)  # constructed spans through the real writer
    for span in spans:
        writer.put(span)
    writer.close()
    with Recording.open(path) as rec:
        end = max((s.end_ns for s in spans), default=0)
        want = reference_phases.phase_stats(rec.spans(), 0, end)
        _same(recording_phase_stats(rec, 0, end), want)
        _same(phase_stats(rec.spans(), 0, end), want)


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_captured_recordings_give_the_reference_statistics(path: Path) -> None:
    with Recording.open(path) as rec:
        start, end = rec.meta.get("start_ns"), rec.meta.get("end_ns")
        if not isinstance(start, int) or not isinstance(end, int):
            start, end = rec.time_range()
        want = reference_phases.phase_stats(rec.spans(), start, end)
        assert any(p.steps for p in want.values())
        _same(recording_phase_stats(rec, start, end), want)


def test_a_synthetic_hour_gives_the_reference_statistics(tmp_path: Path) -> None:
    result = synthesize(tmp_path / "hour.gpuwhy.db", hours=0.5, gpus=1, seed=3)
    with Recording.open(result.path) as rec:
        start, end = rec.meta["start_ns"], rec.meta["end_ns"]
        want = reference_phases.phase_stats(rec.spans(), start, end)
        assert want["train"].steps > 10_000 and want["train"].rounds > 5
        _same(recording_phase_stats(rec, start, end), want)
