"""What counts as warm-up, for the analysis (analysis/steady.py) and the live line
(runtime/progress.py) alike."""

from collections.abc import Sequence

WARMUP_FACTOR = 3.0
"""A leading step slower than 3x the median is warm-up: gpuprof's `compilation_warmup` rule
(first step > 3x median, references.md#gpuprof-insights)."""


def first_steady(
    starts: Sequence[int],
    ends: Sequence[int],
    weights: Sequence[int],
    first: int,
    stop: int,
    median_ns: float,
) -> int:
    """The first steady step of a round, the steps `first` to `stop` (sorted by start; step i
    covers `weights[i]` batches): the leading steps that took more than ``WARMUP_FACTOR`` times
    the median time per step are warm-up, at most half of the round's steps."""
    bound = WARMUP_FACTOR * median_ns
    steady, limit = first, first + (stop - first) // 2
    while steady < limit and bound > 0 and ends[steady] - starts[steady] > bound * weights[steady]:
        steady += 1
    return steady
