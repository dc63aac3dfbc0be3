"""CONSTRUCTED profiler traces for the kernel timeline's tests, built as the readers build them."""

from __future__ import annotations

from gpuwhy.traces import HostCall, OpKind, RankTrace


def big_trace(steps: int, ops_per_step: int) -> RankTrace:
    """CONSTRUCTED: steps of 1 ms, each with back-to-back 5 us kernels on two streams, names
    longer than a page should carry."""
    trace = RankTrace(path="big.pt.trace.json", rank=0, devices={0: "H100"})
    trace.names = [f"void kernel_{k}<" + "T," * 400 + ">" for k in range(50)]
    for step in range(steps):
        start = step * 1_000_000
        trace.steps.append((step, start, start + 1_000_000))
        trace.loader.append(HostCall("enumerate(DataLoader)", start, start + 100_000, 1))
        for k in range(ops_per_step):
            at = start + 100_000 + k * 5_000
            trace.ops.append(at, at + 4_000, 0, 7 + k % 2, OpKind.COMPUTE, k % 50, k + 1)
    return trace
