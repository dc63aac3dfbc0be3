"""The live line's first verdict is the report's: real recordings (an H200's DataLoader jobs and
their profiled runs; on a CPU, Keras `fit` on TensorFlow and on torch, a `GradientTape` loop
over a Python generator, a PyTorch DataLoader loop) replayed through the live meter
(runtime/progress.py) in the order their spans ended. After four dozen train steps the live
wait share is on the same side of the input-bound line as the report's steady share and, where
the job is input-bound, within 0.05 of it.

Before the live share left out the leading warm-up steps, it read 0.72-0.76 after 48 steps of
the H200 input-bound jobs and 0.58 on the Keras one, whose reports say 0.89-0.90 (the first
step, CUDA or TensorFlow starting, counted as time not waiting), and 0.23-0.28 on the fixed jobs
(the first step's wait for the workers to start), calling them input-bound where the reports
say 0.00-0.14.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwhy.analysis import diagnose
from gpuwhy.model import SpanKind
from gpuwhy.recording.reader import Recording
from gpuwhy.report.live import INPUT_BOUND_SHARE
from gpuwhy.runtime.progress import StepMeter

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDINGS = sorted((DATA / "gpu").glob("*/torch_loader/*.gpuwhy.db")) + sorted(
    (DATA / "recordings").glob("cpu-*.gpuwhy.db")
)
STEPS = 48  # "after the first few dozen steps"
TOLERANCE = 0.05  # bench/steady_truth.py's for a wait share


def _live_share_after(recording: Recording, steps: int) -> float:
    spans = sorted(
        (s for s in recording.spans() if s.kind in (SpanKind.STEP, SpanKind.WAIT)),
        key=lambda s: s.end_ns,
    )
    meter = StepMeter(clock=lambda: 0)
    seen = 0
    for span in spans:
        meter.observe(span)
        if span.kind is SpanKind.STEP and span.phase == "train":
            seen += max(1, span.steps)
            if seen >= steps:
                return meter.progress(now_ns=span.end_ns).wait_share or 0.0
    raise AssertionError(f"the recording has {seen} train steps, fewer than {steps}")


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_first_live_verdict_is_the_report_s(path: Path) -> None:
    assert RECORDINGS  # the data is in the repository
    with Recording.open(path) as recording:
        live = _live_share_after(recording, STEPS)
        final = diagnose(recording).phases["train"].data_wait_fraction or 0.0
    print(f"\nlive after {STEPS} steps {live:.3f}, report {final:.3f}")
    assert (live >= INPUT_BOUND_SHARE) == (final >= INPUT_BOUND_SHARE)
    if final >= INPUT_BOUND_SHARE:
        assert abs(live - final) <= TOLERANCE
