"""gpuwhy's figures against a truth taken inside the same runs, run by run: the data-wait
family's targets (docs/data-wait.md), 0.05 of share and 15 % of speed-up, each the median over
runs of a run's figure against that run's truth."""

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
    share_misses = [share - (1 - 1 / truth) for share, truth in zip(shares, truths, strict=True)]
    ratios = [speedup / truth for speedup, truth in zip(speedups, truths, strict=True)]
    print(
        f"\nshare gpuwhy {list(shares)}, minus truth {[round(m, 3) for m in share_misses]}; "
        f"speed-up gpuwhy {list(speedups)}, truth {[round(t, 2) for t in truths]}"
    )
    readings = (list(shares), list(speedups), list(truths))
    assert abs(statistics.median(share_misses)) <= SHARE_TOLERANCE, readings
    assert abs(statistics.median(ratios) - 1) <= SPEEDUP_TOLERANCE, readings
