"""The pinned rate a pageable copy is timed at: the trace's own pinned copies first, the GPU's link
where the recording names one, nothing where the GPUs' links differ (a trace does not say which
GPU it ran on)."""

from __future__ import annotations

import pytest

from gpuwhy.analysis.kernels.copy_rate import (
    PINNED_LINK_SHARE,
    direction,
    link_bytes_per_s,
    pinned_ns,
    pinned_rates,
)
from gpuwhy.model import DeviceInfo
from gpuwhy.traces import OpKind, RankTrace

MIB = 1 << 20


def _gpu(index: int, gen: int | None, width: int | None) -> DeviceInfo:
    return DeviceInfo(index=index, name="GPU", pcie_gen_max=gen, pcie_width_max=width)


def test_the_link_is_read_only_where_every_gpu_shares_it() -> None:
    assert link_bytes_per_s([_gpu(0, 5, 16), _gpu(1, 5, 16)]) == pytest.approx(63.0e9, rel=0.01)
    assert link_bytes_per_s([_gpu(0, 4, 16)]) == pytest.approx(31.5e9, rel=0.01)
    assert link_bytes_per_s([_gpu(0, 5, 16), _gpu(1, 4, 16)]) is None
    assert link_bytes_per_s([_gpu(0, None, None)]) is None
    assert link_bytes_per_s([]) is None


def _trace(*copies: tuple[str, int, int]) -> RankTrace:
    """A trace of copies: (name, bytes, nanoseconds), one after another."""
    trace = RankTrace(path="t")
    at = 0
    for index, (name, size, took) in enumerate(copies):
        trace.names.append(name)
        trace.ops.append(at, at + took, 0, 7, OpKind.MEMCPY, index, index + 1, size)
        at += took
    return trace


def test_the_traces_own_pinned_copies_set_their_directions_rate() -> None:
    trace = _trace(
        ("Memcpy HtoD (Pinned -> Device)", 8 * MIB, 200_000),
        ("Memcpy HtoD (Pinned -> Device)", 8 * MIB, 100_000),
        ("Memcpy HtoD (Pinned -> Device)", 8 * MIB, 100_000),
        ("Memcpy HtoD (Pinned -> Device)", 4096, 10_000),  # latency-bound: not a rate
        ("Memcpy HtoD (Pageable -> Device)", 8 * MIB, 1_000_000),  # not pinned
    )
    trace.link_bytes_per_s = 10e9
    rates = pinned_rates(trace)
    assert rates["HtoD"].source == "trace"
    assert rates["HtoD"].bytes_per_ns == pytest.approx(8 * MIB / 100_000)  # the median
    # No pinned copy back to the host here: that direction takes the link's rate.
    assert rates["DtoH"].source == "link"
    assert rates["DtoH"].bytes_per_ns == pytest.approx(10 * PINNED_LINK_SHARE)
    assert pinned_ns([8 * MIB, 8 * MIB], ["HtoD", "DtoH"], rates) == pytest.approx(
        100_000 + 8 * MIB / (10 * PINNED_LINK_SHARE)
    )


def test_a_copy_of_unknown_size_or_rate_is_not_timed() -> None:
    rates = pinned_rates(_trace(("Memcpy HtoD (Pinned -> Device)", 8 * MIB, 100_000)))
    assert "DtoH" not in rates  # no pinned copy that way, no link
    assert pinned_ns([8 * MIB], ["DtoH"], rates) is None
    assert pinned_ns([0], ["HtoD"], rates) is None
    assert pinned_ns([8 * MIB], [None], rates) is None
    assert pinned_ns([], [], rates) == 0.0
    assert direction("Memcpy DtoH (Device -> Pageable)") == "DtoH"
    assert direction("Memset (Device)") is None
