"""What the job's hooks said they could not see: read from its events, the gravest first."""

from __future__ import annotations

from gpuwhy.analysis.blind_spots import (
    DATA_WAIT_UNAVAILABLE,
    HOOK_FAILED,
    HOOKS_UNAVAILABLE,
    find_blind_spots,
)
from gpuwhy.model import Event


def event(kind: str, message: str, **data: object) -> Event:
    return Event(t_ns=1, kind=kind, message=message, data=dict(data))


def test_each_distinct_blind_spot_once_the_gravest_first() -> None:
    reason = "Keras's loop was compiled before gpuwhy's hooks were in place"
    events = [
        event("sync", "device-to-host synchronisations", phase="train", count=3),
        event(
            DATA_WAIT_UNAVAILABLE,
            f"data wait of 'train' unknown: {reason}",
            phase="train",
            reason=reason,
        ),
        event(HOOK_FAILED, "Keras hook failed: ValueError('x')", key="Keras.on_train_begin"),
        event(DATA_WAIT_UNAVAILABLE, "again", phase="train", reason=reason),  # a second process
        event(HOOKS_UNAVAILABLE, "KeyError('CALL')", pid=7),
        event(HOOKS_UNAVAILABLE, "KeyError('CALL')", pid=8),
    ]
    spots = find_blind_spots(events)
    assert [(s.kind, s.phase, s.reason) for s in spots] == [
        (HOOKS_UNAVAILABLE, None, "KeyError('CALL')"),
        (HOOK_FAILED, None, "Keras hook failed: ValueError('x')"),
        (DATA_WAIT_UNAVAILABLE, "train", reason),
    ]
    assert spots[0].describe().startswith("gpuwhy's hooks did not load in the job (KeyError")
    assert spots[2].describe() == f"data wait of 'train': {reason}"
    assert spots[2].to_dict() == {"kind": DATA_WAIT_UNAVAILABLE, "phase": "train", "reason": reason}


def test_a_job_whose_hooks_said_nothing_has_no_blind_spot() -> None:
    assert find_blind_spots([event("sync", "syncs", phase="train"), event("gc", "gc")]) == ()
