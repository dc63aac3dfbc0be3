"""How long a trace's copies from pageable memory would take from pinned memory.

A pageable copy is staged through a pinned buffer by the driver, at a fraction of the link's rate
(7.2-7.7 GB/s of a 63 GB/s PCIe 5 x16 link on an H200, tests/data/gpu); from pinned memory the
DMA runs at the link's own rate. The pinned rate comes, in order, from the trace's own copies
from pinned memory in the same direction, or from the GPU's PCIe link where a recording knows it
(`run --profile`), at the share of the link's rate pinned copies reach
(references.md#cuda-pageable-copies).
Without either, nothing is said of the pinned copy's time.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuwhy.analysis.rules.transfer import link_bandwidth_bytes_per_s
from gpuwhy.model import DeviceInfo
from gpuwhy.traces import OpKind, RankTrace

PINNED_LINK_SHARE = 0.879
"""The share of the link's rate a pinned host-to-device copy reaches: 256 MiB copies at
55.4 GB/s of the 63.0 GB/s PCIe 5 x16 link (H200 capture of 2026-11-29, pageable_copy's fixed
window)."""
MIN_RATE_BYTES = 1 << 20
"""Copies smaller than 1 MiB are latency-bound: their rate says nothing of the link's."""


@dataclass(frozen=True)
class PinnedRate:
    """Bytes per nanosecond of a pinned copy in one direction, and where the figure comes from."""

    bytes_per_ns: float
    source: str  # "trace": the trace's own pinned copies; "link": the GPU's PCIe link


def direction(name: str) -> str | None:
    """ "HtoD" of "Memcpy HtoD (Pageable -> Device)"; None for a name without one."""
    parts = name.split()
    return parts[1] if len(parts) > 1 and parts[0] == "Memcpy" else None


def link_bytes_per_s(devices: Iterable[DeviceInfo]) -> float | None:
    """The PCIe link's rate (bytes/s, one direction) shared by every recorded GPU; None where
    a GPU's link is unknown or the GPUs' links differ (a trace does not say which GPU it ran)."""
    links = {link_bandwidth_bytes_per_s(d.pcie_gen_max, d.pcie_width_max) for d in devices}
    return links.pop() if len(links) == 1 else None


def pinned_rates(trace: RankTrace) -> dict[str, PinnedRate]:
    """Per direction, the median rate of the trace's pinned copies of at least MIN_RATE_BYTES;
    for the directions with none, the link's where known."""
    ops = trace.ops
    seen: dict[str, list[float]] = {}
    for i in range(len(ops)):
        if ops.kind[i] != OpKind.MEMCPY or ops.size[i] < MIN_RATE_BYTES:
            continue
        name = trace.names[ops.name[i]]
        way = direction(name)
        took = ops.end_ns[i] - ops.start_ns[i]
        if way is not None and "Pinned" in name and took > 0:
            seen.setdefault(way, []).append(ops.size[i] / took)
    rates = {way: PinnedRate(statistics.median(r), "trace") for way, r in seen.items()}
    if trace.link_bytes_per_s:
        link = PinnedRate(trace.link_bytes_per_s * PINNED_LINK_SHARE / 1e9, "link")
        for way in ("HtoD", "DtoH"):
            rates.setdefault(way, link)
    return rates


def pinned_ns(
    sizes: Sequence[int], ways: Sequence[str | None], rates: dict[str, PinnedRate]
) -> float | None:
    """The time copies of ``sizes`` bytes in ``ways`` take from pinned memory; None where a
    copy's size or its direction's rate is unknown."""
    total = 0.0
    for size, way in zip(sizes, ways, strict=True):
        rate = rates.get(way) if way is not None else None
        if rate is None or size <= 0:
            return None
        total += size / rate.bytes_per_ns
    return total
