"""Which input pipeline fed each phase: the hooks' INPUT_EVENT descriptions
(hooks/input_pipelines.py), each placed in the phase whose loop it started.

An iterator is made just before its loop's first pull: inside the phase where the phase began
first (Keras's `fit` and `evaluate`, a validation after `.eval()`), at its very start where the
loop itself opens the phase (a plain loop's phase begins as its iterator is made). So a phase's
pipeline is the first described inside it (in its innermost running phase, where phases nest),
else the last described before it began: a pipeline is described once, as its first iterator is
made, and a phase that reads it again later (a second `fit`) reads the same one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuwhy.analysis.phases import PhaseStats
from gpuwhy.model import Event
from gpuwhy.wire import INPUT_EVENT


def phase_inputs(
    events: Iterable[Event], phases: Mapping[str, PhaseStats]
) -> dict[str, dict[str, Any]]:
    """phase name -> the description of the input pipeline its loop read."""
    extents = [
        (start, end, name)
        for name, phase in phases.items()
        if not phase.is_pseudo
        for start, end in phase.intervals
    ]
    described = sorted((e for e in events if e.kind == INPUT_EVENT), key=lambda e: e.t_ns)
    found: dict[str, dict[str, Any]] = {}
    for event in described:
        running = [(start, name) for start, end, name in extents if start <= event.t_ns < end]
        if running:
            found.setdefault(max(running)[1], dict(event.data))
    for name in {name for *_, name in extents} - set(found):
        began = min(start for start, _, other in extents if other == name)
        before = [e for e in described if e.t_ns <= began]
        if before:
            found[name] = dict(before[-1].data)
    return found
