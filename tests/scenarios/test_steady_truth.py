"""The steady-state family (bench/steady_truth.py): gpuwhy's data-wait share and `phase_speedup`
of real training loops against the truth each job measures on its own steady steps.

Every member runs steady_sweep.py in its own process: the same loop trained in alternated
rounds with its input as built, with the input made free, and as built under gpuwhy's hooks;
gpuwhy's figures come from its analysis of all of the hooked run's spans (warm-up and other
one-time work are its to find). Targets: share within 0.05 and `phase_speedup` within 15 % of
the truth. A member that misses is measured once more (a busy machine moves a 3-round median);
it fails if the second measurement misses too.

Under-reads are held to the bound measured for them instead (below, and docs/data-wait.md,
"Known shortfalls"); over-reads to the targets. The whole family, with more rounds, is
`python bench/steady_truth.py`.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from support import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from steady_truth import BY_NAME, SHARE_TOLERANCE, SPEEDUP_TOLERANCE, measure, misses

pytestmark = pytest.mark.slow
ROUNDS = 3

# On a CPU the truth also holds a cost no stamp can see: compute that follows an idle wait runs
# slower than compute back to back, and the fix removes it too (docs/data-wait.md, "Known
# shortfalls"), so gpuwhy under-reads, the more the quieter the machine (its cores idle deeper).
# Measured 2026-11-25 for these members, whose batches take less than their steps compute
# (bench/results/steady_truth.md and 3-round runs of this test): +0.03 to -0.07 in share, +5 to
# -11 % in speed-up. They are held to that bound, and to the sign: an over-read beyond the
# target is a miss. The 10 ms members under-read by up to -0.13 (-26 %), too close to any bound
# to gate a merge on a machine of unknown idle behaviour: the bench measures them.
IDLE = (0.10, 0.20)
BOUNDS = {
    "fit-map-3": IDLE,
    "tape-map-3": IDLE,
    "torch-loader0-3": IDLE,
}


def _misses(name: str, result: dict[str, Any]) -> list[str]:
    found = misses(result, *BOUNDS[name])
    if result["error"] > SHARE_TOLERANCE or result["speedup_error"] > SPEEDUP_TOLERANCE:
        found.append("a known under-read turned into an over-read beyond the target")
    return found


@pytest.mark.parametrize("name", list(BOUNDS))
def test_steady_share_and_phase_speedup_match_the_truth(name: str, record_property: Any) -> None:
    member = BY_NAME[name]
    pytest.importorskip("torch" if member.loop == "torch" else "tensorflow")
    for attempt in (1, 2):
        result = measure(member, ROUNDS)
        print(
            f"\n{name} (attempt {attempt}): share truth {result['truth']:.3f} gpuwhy "
            f"{result['measured']:.3f} ({result['error']:+.3f}); speed-up truth "
            f"{result['speedup_truth']:.2f} gpuwhy {result['speedup_measured']:.2f} "
            f"({result['speedup_error']:+.1%})"
        )
        misses = _misses(name, result)
        if not misses:
            break
        if attempt == 1:  # listed at the end of the run (tests/conftest.py): seen, not hidden
            record_property("retried", "; ".join(misses))
    assert not misses, misses
