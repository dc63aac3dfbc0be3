"""gpuwhy's figures against a truth taken inside the same runs, run by run: the data-wait
family's targets (docs/data-wait.md), 0.05 of share and 15 % of speed-up, each the median over
runs of a run's figure against that run's truth; or, where gpuwhy's figure is a lower bound of
what the fix gives, not above the truth by more than the targets."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

SHARE_TOLERANCE = 0.05
SPEEDUP_TOLERANCE = 0.15


def assert_runs_agree(
    shares: Sequence[float], speedups: Sequence[float], truths: Sequence[float]
) -> None:
    """Each run's wait share and speed-up against its true speed-up (the share the fix
    removes: 1 - 1 / speed-up)."""
    share_miss, ratio, readings = _medians(shares, speedups, truths)
    assert abs(share_miss) <= SHARE_TOLERANCE, readings
    assert abs(ratio - 1) <= SPEEDUP_TOLERANCE, readings


def assert_runs_at_most(
    shares: Sequence[float], speedups: Sequence[float], truths: Sequence[float]
) -> None:
    """As `assert_runs_agree`, for figures that are lower bounds of the truth: neither above
    it by more than the targets."""
    share_miss, ratio, readings = _medians(shares, speedups, truths)
    assert share_miss <= SHARE_TOLERANCE, readings
    assert ratio - 1 <= SPEEDUP_TOLERANCE, readings


def _medians(
    shares: Sequence[float], speedups: Sequence[float], truths: Sequence[float]
) -> tuple[float, float, tuple[list[float], ...]]:
    """(median share minus true share, median speed-up over truth, the readings), printed."""
    share_misses = [share - (1 - 1 / truth) for share, truth in zip(shares, truths, strict=True)]
    ratios = [speedup / truth for speedup, truth in zip(speedups, truths, strict=True)]
    print(
        f"\nshare gpuwhy {list(shares)}, minus truth {[round(m, 3) for m in share_misses]}; "
        f"speed-up gpuwhy {list(speedups)}, truth {[round(t, 2) for t in truths]}"
    )
    readings = (list(shares), list(speedups), list(truths))
    return statistics.median(share_misses), statistics.median(ratios), readings
