"""gpuwhy.recording: one SQLite file per run — write it, read it back streamed, replay it."""

from gpuwhy.recording.reader import Recording
from gpuwhy.recording.replay import ReplaySource
from gpuwhy.recording.schema import SCHEMA_VERSION
from gpuwhy.recording.tiers import Summary, TierBucket
from gpuwhy.recording.writer import RecordingWriter

__all__ = ["SCHEMA_VERSION", "Recording", "RecordingWriter", "ReplaySource", "Summary",
           "TierBucket"]
