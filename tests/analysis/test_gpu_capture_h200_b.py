"""gpuwhy on a real GPU: slow_validation as the second H200 card of 2026-11-29 captured it
(tests/data/gpu/2026-11-29-nvidia-h200, its README says how), replayed through today's
analysis beside the truth the job measured itself (`*.truth.json`: its own phase timers).

The job trains 300 steps an epoch, then validates 40 batches between `model.eval()` and the next
epoch's `model.train()`, three epochs (bench/gpu_jobs/torch_slow_validation.py): slow, each
batch's predictions copied to the host and scored in Python behind a slow read; fixed, the metric
on the device.
"""

from __future__ import annotations

import pytest

from support.gpu_capture import TOLERANCE, Capture, codes, finding

H200 = Capture("2026-11-29-nvidia-h200")
diagnosed, truth, runs = H200.diagnosed, H200.truth, H200.runs
PAIRS = (("slow-0", "fixed-0"), ("slow-1", "fixed-1"))


def _rounds(run: str) -> tuple[int, float, float]:
    """(the validation rounds gpuwhy named, their seconds, the job's own seconds a round)."""
    validation = diagnosed("slow_validation", run).phases["validation"]
    facts = truth("slow_validation", run)
    return validation.rounds, validation.time_s, facts["phases_s"]["validation"] / facts["epochs"]


def test_the_capture_holds_both_pairs() -> None:
    assert runs("slow_validation", "slow") == ["slow-0", "slow-1"]
    assert runs("slow_validation", "fixed") == ["fixed-0", "fixed-1"]


@pytest.mark.parametrize("run", [run for pair in PAIRS for run in pair])
def test_each_named_validation_round_is_the_jobs_own(run: str) -> None:
    """Each round gpuwhy named as validation lasted what the job's own timer says a round took
    (0.64-0.72 s slow, 0.04-0.05 s fixed), and training kept its 299 steps an epoch (the 300th
    optimizer step's tail is the evaluation's start)."""
    rounds, seconds, per_round = _rounds(run)
    assert rounds >= 2
    assert seconds / rounds == pytest.approx(per_round, rel=TOLERANCE)
    assert diagnosed("slow_validation", run).phases["train"].steps == 3 * 299


@pytest.mark.xfail(
    strict=True,
    reason="these recordings predate the naming of a last evaluation that the job's exit ends "
    "(no `.train()` after it): gpuwhy named 2 of the 3 rounds, 1.36 s of the job's 2.09 s; "
    "tests/hooks/test_validation_by_mode.py holds the fix on the CPU, a capture with today's "
    "hooks is to replace these",
)
@pytest.mark.parametrize("run", ["slow-0", "slow-1"])
def test_every_validation_round_is_named(run: str) -> None:
    rounds, seconds, per_round = _rounds(run)
    assert rounds == truth("slow_validation", run)["epochs"]
    assert seconds == pytest.approx(per_round * rounds, rel=TOLERANCE)


def test_only_the_slow_validation_is_slow_validation() -> None:
    """The slow runs' validation keeps the GPU idle while the host scores: SLOW_VALIDATION (and
    the gap between the phases' GPU use); the fixed runs get neither."""
    both = {"SLOW_VALIDATION", "PHASE_GPU_GAP"}
    for slow, fixed in PAIRS:
        assert both <= set(codes(diagnosed("slow_validation", slow)))
        evidence = finding(diagnosed("slow_validation", slow), "SLOW_VALIDATION").evidence
        assert evidence["validation_rounds"] == 2
        assert not both & set(codes(diagnosed("slow_validation", fixed)))
