"""The phases' one-time work in words, for the terminal and the HTML report alike.

A phase's step and data-wait figures describe its steady steps; what it spent once (warm-up
steps, a slow first round, time before its first step or waiting for its input to end, calls
that traced or compiled the step again) is told apart, each part with its time.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuwhy.analysis import PhaseStats
from gpuwhy.durations import seconds

ONE_TIME_SHOWN = 0.05
"""One-time work is listed from 5 % of a phase (XProf's moderate band): below, it changes no
figure a reader would act on."""
NEGLIGIBLE_S = 0.0005  # a part shorter than this would print as "0.0 ms"-ish noise
HEADING = "One-time work (step and data-wait figures are of the steady steps): "


def parts(phase: PhaseStats) -> list[str]:
    """Each kind of one-time work the phase holds, with its time."""
    found = []
    if phase.cold_round_steps:
        found.append(
            f"a first round of {phase.cold_round_steps} steps slower than the later ones "
            f"{seconds(phase.cold_round_s)}"
        )
    if phase.warmup_steps:
        noun = "step" if phase.warmup_steps == 1 else "steps"
        found.append(f"{phase.warmup_steps} warm-up {noun} {seconds(phase.warmup_s)}")
    if phase.lead_in_s >= NEGLIGIBLE_S:
        found.append(f"before the first step {seconds(phase.lead_in_s)}")
    if phase.input_end_s >= NEGLIGIBLE_S:
        found.append(f"waiting for the input to end {seconds(phase.input_end_s)}")
    if phase.retraces:
        noun = "call" if phase.retraces == 1 else "calls"
        found.append(
            f"{phase.retraces} {noun} that traced or compiled the step again "
            f"{seconds(phase.retraced_s)}"
        )
    return found


def shown(phase: PhaseStats) -> bool:
    """Whether the phase's one-time work is large enough to be listed."""
    if phase.is_pseudo or not phase.steps or phase.time_s <= 0:
        return False
    return phase.one_time_s >= ONE_TIME_SHOWN * phase.time_s


def describe(phase: PhaseStats) -> str:
    """ "'train' 1.8 s (1 warm-up step 1.5 s, before the first step 300 ms)"."""
    detail = parts(phase)
    text = f"'{phase.name}' {seconds(phase.one_time_s)}"
    return text + (f" ({', '.join(detail)})" if detail else "")


def line(phases: Mapping[str, PhaseStats]) -> str:
    """The phases whose one-time work is shown, in one line; "" where none is."""
    described = [describe(phase) for phase in phases.values() if shown(phase)]
    return HEADING + "; ".join(described) if described else ""
