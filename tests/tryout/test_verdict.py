"""The verdict on a measured fix: a gain counts only beyond the noise of both sides' runs."""

from __future__ import annotations

from gpuwhy.tryout.candidates import Fix
from gpuwhy.tryout.session import FASTER, NO_CHANGE, SLOWER, Row

FIX = Fix({"torch.num_workers": 2})


def measured(baseline: list[float], with_fix: list[float]) -> Row:
    row = Row(FIX, None, applied=True)
    row.baseline_per_batch_s = baseline
    row.per_batch_s = with_fix
    row.ratios = [base / fixed for base, fixed in zip(baseline, with_fix, strict=True)]
    return row


def test_a_clear_gain_is_faster() -> None:
    row = measured([0.030, 0.031, 0.030], [0.020, 0.021, 0.020])
    assert row.verdict == FASTER
    assert abs(row.noise - 0.05) < 1e-9


def test_a_lean_inside_the_fixs_own_noise_is_no_change() -> None:
    # The job as written held steady; the fix's runs varied by 25 %: its slowest round beats
    # the job as written by 13 %, less than the fix varies by itself.
    row = measured([0.0300, 0.0301, 0.0300], [0.0212, 0.0265, 0.0225])
    assert row.speedup is not None and row.speedup > 1.05
    assert row.spread is not None and row.spread[0] > 1.0 + 0.0034
    assert row.verdict == NO_CHANGE


def test_a_lean_inside_the_job_as_writtens_noise_is_no_change() -> None:
    row = measured([0.024, 0.030, 0.028], [0.022, 0.025, 0.024])
    assert row.verdict == NO_CHANGE


def test_a_clear_loss_is_slower_and_a_noisy_one_is_not() -> None:
    assert measured([0.020, 0.020, 0.021], [0.030, 0.031, 0.030]).verdict == SLOWER
    assert measured([0.020, 0.020, 0.021], [0.023, 0.030, 0.024]).verdict == NO_CHANGE
