"""One run of the job with one set of fixes, stopped after its step budget, and what it measured.

The run is an ordinary `gpuwhy run` recording (runtime.job) into `gpuwhy try`'s scratch folder,
with the job's output in a log beside it; the figure taken from it is the time per batch of the
measured phase: the steps after the first `skip` batches (start-up, compilation, the workers'
first batches), their durations summed over the batches they ran. Steps tile their loop
(docs/hooks.md), so the sum holds the steps' compute, their waits for input and the host work
between them: everything a fix of the input or of the step overhead can change.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuwhy.analysis.spanruns import Runs
from gpuwhy.analysis.steady import input_ends_of
from gpuwhy.errors import RecordingError
from gpuwhy.model import NS_PER_S, SpanKind
from gpuwhy.recording.reader import Recording
from gpuwhy.runtime.job import JobOptions, run_job
from gpuwhy.wire import TRY_SEEN_EVENT, TRY_STOPPED_EVENT


@dataclass(frozen=True)
class Budget:
    """How long each run goes: `skip` batches of warm-up, then `steps` batches or `time_s`."""

    steps: int
    skip: int
    time_s: float | None = None


@dataclass(frozen=True)
class TrialResult:
    """One run: its time per batch (None when it measured too few), and how it ended."""

    settings: Mapping[str, Any]
    per_batch_s: float | None
    batches: int  # measured (after the skipped ones)
    phase: str | None
    stopped: bool  # stopped by its budget (False: the job ended on its own, or failed)
    exit_code: int
    seen: Mapping[str, Any] = field(default_factory=dict)  # the try_seen event's data
    problem: str | None = None  # why it measured nothing: the job's last output line, say
    record: Path | None = None


def run_trial(
    command: Sequence[str],
    settings: Mapping[str, Any],
    budget: Budget,
    *,
    phase: str | None,
    folder: Path,
    name: str,
    environ: Mapping[str, str] = os.environ,
    probe_environment: bool = False,
    min_batches: int = 1,
) -> TrialResult:
    """Run the job once with ``settings`` applied; never raises for the job's own failures."""
    record = folder / f"{name}.gpuwhy.db"
    log = folder / f"{name}.log"
    trial = {
        "fixes": dict(settings),
        "phase": phase,
        "skip": budget.skip,
        "steps": budget.skip + budget.steps,
        "time_s": budget.time_s,
    }
    options = JobOptions(
        command=command,
        record=record,
        interval_s=0.1,
        probe_environment=probe_environment,
        trial=json.dumps(trial),
        output=log,
    )
    result = run_job(options, environ=environ)
    if result.crash is not None:
        raise result.crash
    try:
        with Recording.open(record) as recording:
            seen, stopped = _trial_events(recording)
            measured_phase = seen.get("phase") or phase
            per_batch, batches = _per_batch(recording, measured_phase, budget.skip)
    except RecordingError as error:
        return TrialResult(settings, None, 0, phase, False, result.exit_code, problem=str(error))
    problem = None
    if batches < min_batches or per_batch is None:
        problem = _why_nothing(result.exit_code, stopped, batches, log)
    return TrialResult(
        settings,
        per_batch if problem is None else None,
        batches,
        measured_phase,
        stopped,
        result.exit_code,
        seen,
        problem,
        record,
    )


def _trial_events(recording: Recording) -> tuple[dict[str, Any], bool]:
    seen: dict[str, Any] = {}
    stopped = False
    for event in recording.events():
        if event.kind == TRY_SEEN_EVENT:
            seen = dict(event.data)
        elif event.kind == TRY_STOPPED_EVENT:
            stopped = True
    return seen, stopped


def _per_batch(recording: Recording, phase: str | None, skip: int) -> tuple[float | None, int]:
    """Seconds per batch over the phase's steps after the first `skip` batches, without the
    waits for the input to end (once per epoch, not per batch: workers shutting down, a tf.data
    pipeline destroyed, from 0.3 to 75 ms at random), as the report's steady figures."""
    if phase is None:
        return None, 0
    steps = sorted(
        (span.start_ns, span.end_ns, max(1, span.steps))
        for span in recording.spans(SpanKind.STEP, phase)
    )
    waits = Runs()
    for span in recording.spans(SpanKind.WAIT, phase):
        waits.add(span.start_ns, span.end_ns, span.steps)
    seen_batches = total_ns = batches = 0
    measured_from = None
    for start, end, count in steps:
        seen_batches += count
        if seen_batches <= skip:
            continue
        measured_from = start if measured_from is None else measured_from
        total_ns += end - start
        batches += count
    if not batches or measured_from is None:
        return None, 0
    total_ns -= sum(end - start for start, end in input_ends_of(waits) if start >= measured_from)
    return total_ns / NS_PER_S / batches, batches


def _why_nothing(exit_code: int, stopped: bool, batches: int, log: Path) -> str:
    if exit_code != 0 and not stopped:
        return f"the job failed (exit {exit_code}): {_last_line(log)}"
    if batches == 0:
        return (
            "no training steps after the warm-up (no Keras fit, DataLoader, tf.data loop or "
            "optimizer step seen)"
        )
    return f"only {batches} batches measured after the warm-up"


def _last_line(log: Path) -> str:
    try:
        with open(log, "rb") as file:
            file.seek(max(0, os.path.getsize(log) - 4096))
            lines = file.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return "no output"
    return lines[-1][:300] if lines else "no output"
