"""What gpuwhy could not see in a job, said in the report rather than left as a blank.

The job's hooks report it as events: the hooks did not load at all in a process
(`hooks_unavailable`: its phases, steps and waits are missing, not zero), a hook failed or could
not apply to the framework's layout (`hook`), a phase's data wait could not be measured
(`data_wait_unavailable`, with the reason). Without these, a report of such a job reads "no
runtime findings", as if all were well.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpuwhy.model import Event

HOOKS_UNAVAILABLE = "hooks_unavailable"
"""Event kind: gpuwhy's hooks could not load in a process of the job (boot, `gpuwhy.monitor`)."""

HOOK_FAILED = "hook"
"""Event kind: one hook failed or could not apply (`emitter.report_once`'s default)."""

DATA_WAIT_UNAVAILABLE = "data_wait_unavailable"
"""Event kind: a phase's data wait is not measured, and why (`data.phase`, `data.reason`)."""

_ORDER = {HOOKS_UNAVAILABLE: 0, HOOK_FAILED: 1, DATA_WAIT_UNAVAILABLE: 2}


@dataclass(frozen=True)
class BlindSpot:
    kind: str  # one of the event kinds above
    reason: str
    phase: str | None = None

    def describe(self) -> str:
        if self.kind == HOOKS_UNAVAILABLE:
            return (
                f"gpuwhy's hooks did not load in the job ({self.reason}): its phases, steps "
                "and input waits are missing, not zero"
            )
        if self.kind == DATA_WAIT_UNAVAILABLE and self.phase:
            return f"data wait of {self.phase!r}: {self.reason}"
        return self.reason

    def to_dict(self) -> dict[str, str | None]:
        return {"kind": self.kind, "phase": self.phase, "reason": self.reason}


def find_blind_spots(events: Iterable[Event]) -> tuple[BlindSpot, ...]:
    """The distinct blind spots the job's events tell, the gravest first."""
    seen: dict[tuple[str, str | None, str], BlindSpot] = {}
    for event in events:
        if event.kind not in _ORDER:
            continue
        phase = event.data.get("phase")
        phase = str(phase) if phase is not None else None
        reason = event.data.get("reason") if event.kind == DATA_WAIT_UNAVAILABLE else None
        text = str(reason or event.message)
        spot = BlindSpot(event.kind, text, phase if event.kind == DATA_WAIT_UNAVAILABLE else None)
        seen.setdefault((spot.kind, spot.phase, spot.reason), spot)
    return tuple(sorted(seen.values(), key=lambda s: _ORDER[s.kind]))
