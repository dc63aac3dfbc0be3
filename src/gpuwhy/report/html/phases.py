"""Phases on the timeline: their colours (shared with the phase table) and their bands.

Bands are the phase's intervals as the analysis found them (one per epoch, validation pass...).
A long run with frequent short evaluations can have tens of thousands; past MAX_INTERVALS the
closest ones are joined, which at the page's resolution (a pixel is minutes of a day) hides
nothing a reader could see.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpuwhy.analysis import Diagnosis
from gpuwhy.analysis.phases import DATA_WAIT, OTHER
from gpuwhy.model import NS_PER_S

MAX_INTERVALS = 20_000  # phase intervals drawn as bands, all phases together

WAIT_COLOR = "#e67e22"
OTHER_COLOR = "#c9ccd1"
_KNOWN_PHASE_COLORS = {
    "train": "#3b7dd8",
    "training": "#3b7dd8",
    "fit": "#3b7dd8",
    "validation": "#9b59b6",
    "val": "#9b59b6",
    "evaluate": "#8e44ad",
    "eval": "#8e44ad",
    "test": "#8e44ad",
    "predict": "#17a589",
    "inference": "#17a589",
}
_USER_PHASE_COLORS = ("#27ae60", "#c9a30b", "#5d6d7e", "#a04000", "#1abc9c", "#7d3c98")


def phase_colors(names: Iterable[str]) -> dict[str, str]:
    """Training blue, validation purple, prediction teal, data wait orange, other grey; phases
    of the user's own naming take the palette in order of appearance."""
    colors: dict[str, str] = {}
    user = 0
    for name in names:
        if name == DATA_WAIT:
            colors[name] = WAIT_COLOR
        elif name == OTHER:
            colors[name] = OTHER_COLOR
        elif name.lower() in _KNOWN_PHASE_COLORS:
            colors[name] = _KNOWN_PHASE_COLORS[name.lower()]
        else:
            colors[name] = _USER_PHASE_COLORS[user % len(_USER_PHASE_COLORS)]
            user += 1
    return colors


def simplify_intervals(intervals: list[tuple[int, int]], min_gap_ns: int) -> list[tuple[int, int]]:
    """Join intervals separated by less than `min_gap_ns` (bands narrower than a pixel)."""
    joined: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if joined and start - joined[-1][1] < min_gap_ns:
            joined[-1] = (joined[-1][0], max(joined[-1][1], end))
        else:
            joined.append((start, end))
    return joined


def phase_bands(diagnosis: Diagnosis, start_ns: int, span_ns: int) -> list[dict[str, Any]]:
    """Each phase (and "other") with its colour and intervals in seconds from the run's start;
    past MAX_INTERVALS in all, intervals closer than a growing gap are joined."""
    chosen = [p for p in diagnosis.phases.values() if p.name != DATA_WAIT and p.intervals]
    intervals = {p.name: list(p.intervals) for p in chosen}
    gap = 0
    while sum(len(v) for v in intervals.values()) > MAX_INTERVALS:
        gap = max(gap * 2, span_ns // (MAX_INTERVALS * 4), 1)
        intervals = {n: simplify_intervals(list(v), gap) for n, v in intervals.items()}
    colors = phase_colors(diagnosis.phases)
    bands = []
    for phase in chosen:
        flat = [round((t - start_ns) / NS_PER_S, 3) for pair in intervals[phase.name] for t in pair]
        bands.append(
            {
                "name": phase.name,
                "color": colors[phase.name],
                "intervals": flat,
                "background": phase.is_pseudo,
            }
        )
    return bands
