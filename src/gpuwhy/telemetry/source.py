"""The Source protocol every telemetry source implements, and the sampler's Snapshot.

A source is polled by one sampler thread: `available()` says cheaply whether it can work here,
`open()` starts it and names the devices it reports on, `read(now_ns)` returns the records due at
`now_ns` (a monotonic-ns time the sampler gives, so every source of one tick shares it), and
`close()` releases it. A value a source cannot give is `None` in its record, never an
exception; an exception from `read` means the source as a whole failed (the sampler then marks it
degraded and goes on with the others).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from gpuwhy.model import DeviceInfo, GpuSample, HostSample, Record


@runtime_checkable
class Source(Protocol):
    """A telemetry source driven by the sampler."""

    name: str

    def available(self) -> bool:
        """Whether the source can work on this machine (cheap; never raises)."""
        ...

    def open(self) -> list[DeviceInfo]:
        """Start the source; the devices it reports on ([] for the host)."""
        ...

    def read(self, now_ns: int) -> list[Record]:
        """Records due at `now_ns` (monotonic ns). Raises only if the whole source failed."""
        ...

    def close(self) -> None:
        """Release what `open` took. Idempotent."""
        ...


@dataclass(frozen=True)
class Snapshot:
    """The newest reading of everything: one GPU sample per device and one host sample."""

    t_ns: int | None = None  # time of the tick that produced the newest reading
    gpus: Mapping[int, GpuSample] = field(default_factory=dict)
    host: HostSample | None = None
