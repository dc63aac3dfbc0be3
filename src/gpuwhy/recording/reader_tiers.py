"""The downsampled side of `Recording`: tiers, exact window and segment summaries, tiers as
columns. A mixin: `Recording` supplies the connection, the format and the error mapping."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator, Sequence
from typing import TypeVar

from gpuwhy.errors import RecordingError
from gpuwhy.recording import tiercolumns, tierqueries
from gpuwhy.recording.streams import GPU, HOST, UTIL, StreamSpec
from gpuwhy.recording.tiercolumns import TierColumns
from gpuwhy.recording.tiers import TierBucket

T = TypeVar("T")


class TierReads:
    """Tier and summary queries of an open recording."""

    _db: sqlite3.Connection

    def _damaged(self, error: Exception) -> RecordingError:
        raise NotImplementedError

    def _guarded(self, items: Iterator[T]) -> Iterator[T]:
        raise NotImplementedError

    def _queries(self) -> tierqueries.TierQueries:
        return tierqueries.TierQueries(self._db, self._damaged)

    def gpu_tiers(
        self,
        width_ns: int,
        device: int | None = None,
        start_ns: int | None = None,
        end_ns: int | None = None,
    ) -> Iterator[TierBucket]:
        """Per GPU, buckets of `width_ns` (a multiple of 1 s) starting in [start_ns, end_ns):
        sample count and count/sum/min/max of every GpuSample metric, clock-event reason bits
        counted; in time order, then device. Metric names are GpuSample's field names."""
        return self._queries().tiers(GPU, width_ns, device, start_ns, end_ns)

    def util_tiers(
        self,
        width_ns: int,
        device: int | None = None,
        start_ns: int | None = None,
        end_ns: int | None = None,
    ) -> Iterator[TierBucket]:
        """Buckets of the driver-buffered utilization samples; metrics "gpu_pct", "memory_pct"."""
        return self._queries().tiers(UTIL, width_ns, device, start_ns, end_ns)

    def host_tiers(
        self, width_ns: int, start_ns: int | None = None, end_ns: int | None = None
    ) -> Iterator[TierBucket]:
        """Buckets of host samples; metrics are HostSample's field names, in its units."""
        return self._queries().tiers(HOST, width_ns, None, start_ns, end_ns)

    def gpu_tier_columns(
        self,
        width_ns: int,
        start_ns: int | None = None,
        end_ns: int | None = None,
        metrics: Collection[str] | None = None,
        device: int | None = None,
    ) -> Iterator[TierColumns]:
        """`gpu_tiers` as columns, a stored block at a time, only the named metrics (GpuSample
        field names; of one `device`, or all): for drawing a long run (tiercolumns.py). A
        bucket may come in parts (from two blocks) that the caller adds up."""
        return self._tier_columns(GPU, width_ns, start_ns, end_ns, metrics, device)

    def util_tier_columns(
        self,
        width_ns: int,
        start_ns: int | None = None,
        end_ns: int | None = None,
        metrics: Collection[str] | None = None,
    ) -> Iterator[TierColumns]:
        """`gpu_tier_columns` for the driver-buffered utilization ("gpu_pct", "memory_pct")."""
        return self._tier_columns(UTIL, width_ns, start_ns, end_ns, metrics)

    def host_tier_columns(
        self,
        width_ns: int,
        start_ns: int | None = None,
        end_ns: int | None = None,
        metrics: Collection[str] | None = None,
    ) -> Iterator[TierColumns]:
        """`gpu_tier_columns` for the host samples (HostSample field names)."""
        return self._tier_columns(HOST, width_ns, start_ns, end_ns, metrics)

    def _tier_columns(
        self,
        spec: StreamSpec,
        width_ns: int,
        start_ns: int | None,
        end_ns: int | None,
        metrics: Collection[str] | None,
        device: int | None = None,
    ) -> Iterator[TierColumns]:
        return self._guarded(
            tiercolumns.tier_columns(self._db, spec, width_ns, device, start_ns, end_ns, metrics)
        )

    def gpu_summary(
        self, start_ns: int | None = None, end_ns: int | None = None, device: int | None = None
    ) -> dict[int, TierBucket]:
        """Per GPU, one bucket summarising exactly the samples with start_ns <= t_ns < end_ns.

        Reads whole-minute and whole-second tiers inside the range and raw samples only in the
        sub-second edges: milliseconds for any window, however long.
        """
        return self._queries().summary(GPU, start_ns, end_ns, device)  # type: ignore[return-value]

    def util_summary(
        self, start_ns: int | None = None, end_ns: int | None = None, device: int | None = None
    ) -> dict[int, TierBucket]:
        """`gpu_summary` for the driver-buffered utilization samples."""
        return self._queries().summary(UTIL, start_ns, end_ns, device)  # type: ignore[return-value]

    def gpu_segments(
        self,
        bounds_ns: Sequence[int],
        device: int | None = None,
        metrics: Collection[str] | None = None,
    ) -> list[dict[int, TierBucket]]:
        """Per segment [bounds_ns[i], bounds_ns[i + 1]) (strictly increasing bounds), per GPU,
        the exact summary `gpu_summary` gives for it: one pass for all segments, reading raw
        samples only in the minutes a bound cuts (segments.py). With `metrics` (GpuSample field
        names), only those are summarised, the others read as absent: less to decode."""
        return self._queries().segments(
            GPU,
            bounds_ns,
            device,  # type: ignore[return-value]
            metrics,
        )

    def util_segments(
        self,
        bounds_ns: Sequence[int],
        device: int | None = None,
        metrics: Collection[str] | None = None,
    ) -> list[dict[int, TierBucket]]:
        """`gpu_segments` for the driver-buffered utilization samples ("gpu_pct",
        "memory_pct")."""
        return self._queries().segments(
            UTIL,
            bounds_ns,
            device,  # type: ignore[return-value]
            metrics,
        )

    def host_segments(self, bounds_ns: Sequence[int]) -> list[TierBucket | None]:
        """`gpu_segments` for the host samples: one bucket per segment, None where it has none."""
        return [found.get(None) for found in self._queries().segments(HOST, bounds_ns, None)]

    def host_summary(
        self,
        start_ns: int | None = None,
        end_ns: int | None = None,
    ) -> TierBucket | None:
        """The host samples in the range, summarised exactly; None if there are none."""
        return self._queries().summary(HOST, start_ns, end_ns, None).get(None)
