"""ReplaySource: a recording played back as a telemetry source (tests, re-analysis, demos).

The recording's GPU, buffered-utilization and host samples are merged into one time-ordered
stream (three streamed cursors: flat memory however long the recording) and handed out as they
fall due: the first `read(now)` anchors the recording's start to `now`, and each later read
returns the samples up to `start + (now - anchor) × speed`. With `shift_time` the samples carry
the replay's times (they look live to whoever records them); without it, their original ones.
Spans and events are not telemetry and are not replayed: read them from the Recording.
"""

from __future__ import annotations

import dataclasses
import heapq
import os
from collections.abc import Iterator

from gpuwhy.errors import RecordingError
from gpuwhy.model import DeviceInfo, GpuSample, HostSample, Record, UtilSample
from gpuwhy.recording.reader import Recording

Sample = GpuSample | UtilSample | HostSample


class ReplaySource:
    """Plays a recording's samples back in (scaled) real time."""

    name = "replay"

    def __init__(
        self,
        recording: Recording | str | os.PathLike[str],
        *,
        speed: float = 1.0,
        shift_time: bool = True,
    ) -> None:
        if not speed > 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self.shift_time = shift_time
        self.unavailable_reason: str | None = None
        self._path = None if isinstance(recording, Recording) else recording
        self._recording = recording if isinstance(recording, Recording) else None
        self._stream: Iterator[Sample] | None = None
        self._next: Sample | None = None
        self._start_ns: int | None = None
        self._anchor_ns: int | None = None
        self.exhausted = False

    def _load(self) -> Recording:
        if self._recording is None:
            assert self._path is not None
            self._recording = Recording.open(self._path)
        return self._recording

    def available(self) -> bool:
        """True if the recording opens; otherwise `unavailable_reason` says why."""
        try:
            self._load()
        except RecordingError as error:
            self.unavailable_reason = error.one_line()
            return False
        return True

    def open(self) -> list[DeviceInfo]:
        """The recording's devices; starts the merged sample stream."""
        recording = self._load()
        self._stream = heapq.merge(
            recording.gpu_samples(),
            recording.util_samples(),
            recording.host_samples(),
            key=lambda sample: sample.t_ns,
        )
        self._next = next(self._stream, None)
        self.exhausted = self._next is None
        self._start_ns = None if self._next is None else self._next.t_ns
        return list(recording.devices)

    def read(self, now_ns: int) -> list[Record]:
        """The samples that have fallen due by `now_ns`, in time order."""
        if self._stream is None or self._next is None or self._start_ns is None:
            return []
        if self._anchor_ns is None:
            self._anchor_ns = now_ns
        due_until = self._start_ns + (now_ns - self._anchor_ns) * self.speed
        records: list[Record] = []
        sample: Sample | None = self._next
        while sample is not None and sample.t_ns <= due_until:
            records.append(self._shifted(sample) if self.shift_time else sample)
            sample = next(self._stream, None)
        self._next = sample
        self.exhausted = sample is None
        return records

    def _shifted(self, sample: Sample) -> Sample:
        assert self._start_ns is not None and self._anchor_ns is not None
        t_ns = self._anchor_ns + round((sample.t_ns - self._start_ns) / self.speed)
        return dataclasses.replace(sample, t_ns=t_ns)

    def close(self) -> None:
        """Close the recording if this source opened it."""
        self._stream = None
        if self._path is not None and self._recording is not None:
            self._recording.close()
            self._recording = None
