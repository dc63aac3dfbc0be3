"""gpuwhy.recording: one SQLite file per run — write it, read it back streamed, replay it.

The public names are imported on first use, so `gpuwhy run`, which only writes before the job
starts, does not pay for the reader's import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuwhy.recording.reader import Recording
    from gpuwhy.recording.replay import ReplaySource
    from gpuwhy.recording.schema import RECORDING_FORMAT_VERSION
    from gpuwhy.recording.tiers import Summary, TierBucket
    from gpuwhy.recording.writer import RecordingWriter

_LAZY = {
    "Recording": "gpuwhy.recording.reader",
    "ReplaySource": "gpuwhy.recording.replay",
    "RECORDING_FORMAT_VERSION": "gpuwhy.recording.schema",
    "Summary": "gpuwhy.recording.tiers",
    "TierBucket": "gpuwhy.recording.tiers",
    "RecordingWriter": "gpuwhy.recording.writer",
}

__all__ = [
    "RECORDING_FORMAT_VERSION",
    "Recording",
    "RecordingWriter",
    "ReplaySource",
    "Summary",
    "TierBucket",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
