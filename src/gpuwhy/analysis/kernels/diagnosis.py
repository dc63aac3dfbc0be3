"""Profiler traces in, a `Diagnosis` out: the same report a recording gets, measured from kernels.

The profiled steps form one phase ("train" when the trace shows a backward pass, else "steps").
Its GPU figures come from the device work itself, so they are exact where NVML's are sampled:
``gpu_busy`` is the share of the steps' time some kernel, copy or set ran, and ``gpu_util`` (the
column every report has) carries the same measure in percent. The phase's data wait is the
*exposed* loader time (steps.py). Several ranks: the phase figures are the first rank's, the
per-rank figures are in ``Diagnosis.kernels``.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpuwhy.analysis.diagnose import DeviceStats, Diagnosis
from gpuwhy.analysis.framework import Framework
from gpuwhy.analysis.kernels.breakdown import stream_idle, temporal, without_last_step
from gpuwhy.analysis.kernels.findings import CHECKS, WINDOW_CHECKS
from gpuwhy.analysis.kernels.placement import cpu_ops_beside_gpu, not_on_gpu
from gpuwhy.analysis.kernels.ranks import rank_imbalance
from gpuwhy.analysis.kernels.steps import RankFacts, StepFacts, busy_timeline, rank_facts
from gpuwhy.analysis.phases import PhaseStats, weighted_percentile
from gpuwhy.model import NS_PER_S, DeviceInfo, Finding, sort_findings
from gpuwhy.traces import OpKind, RankTrace

TOP_KERNELS = 5


@dataclass(frozen=True)
class KernelTotal:
    name: str
    kind: str
    count: int
    time_s: float
    share: float  # of the rank's device-busy time


@dataclass(frozen=True)
class RankSummary:
    """One rank's kernel-level figures over its profiled steps: shares of their summed time,
    per-step times as means, kernel counts and sizes as medians."""

    rank: int | None
    path: str
    devices: dict[int, str]
    steps: int
    step_markers: bool  # False: the trace had none, its device work counts as one step
    steps_on_device: bool  # the host ran ahead: its step markers projected onto the device
    step_time_p50_s: float | None
    gpu_busy: float | None  # union of device work / step time
    idle_split: dict[str, float]  # host_wait, kernel_wait, other: fractions of step time
    work_split: dict[str, float]  # compute, communication, memcpy, memset: of step time
    comm_overlap: float | None  # share of communication time also covered by compute
    kernels_per_step: float | None
    kernel_median_us: float | None
    loader_ms: float | None  # data loader __next__ per step
    loader_exposed_ms: float | None
    sync_ms: float | None  # blocking synchronising calls per step
    optimizer_ms: float | None
    # HTA's temporal breakdown over HTA's window (breakdown.py): idle, compute, non_compute.
    temporal: dict[str, float] | None = None
    # HTA's idle split per stream over the same window: stream -> idle_s and its shares by cause.
    stream_idle: dict[str, dict[str, float]] | None = None
    # Busy share in equal buckets over the steps, and the steps' starts (steps.busy_timeline).
    busy_timeline: dict[str, Any] | None = None
    top_kernels: list[KernelTotal] = field(default_factory=list)
    # Each step's own figures, in order (step_rows): what the medians and means above summarise.
    per_step: list[dict[str, Any]] = field(default_factory=list)
    # Per device (id as a string), its busy share, idle split and work over the steps' time
    # (device_rows); the figures above are unions over all the rank's devices.
    per_device: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class KernelReport:
    """What a trace adds to a report: its source and each rank's kernel-level summary."""

    source: str  # what was read: "kineto" or "xplane"
    paths: list[str]
    ranks: list[RankSummary]
    window: Mapping[str, Any] | None = None  # `run --profile`: the window's bounds and cost


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _per_step(steps: Sequence[StepFacts], value: str, scale: float = 1.0) -> float | None:
    """The median of ``value`` over the steps, divided by ``scale``."""
    result = _median([getattr(s, value) / scale for s in steps])
    return None if result is None else round(result, 4)


def _mean(steps: Sequence[StepFacts], value: str, scale: float) -> float | None:
    return round(sum(getattr(s, value) for s in steps) / len(steps) / scale, 4) if steps else None


def _fraction(steps: Sequence[StepFacts], value: str) -> float:
    """Summed ``value`` over the steps' summed time: the share the phase table would show."""
    total = sum(s.time_ns for s in steps)
    return round(sum(getattr(s, value) for s in steps) / total, 4) if total else 0.0


class _Split(Protocol):
    """A span of steps' idle split and work (StepFacts, DeviceFacts), in nanoseconds."""

    @property
    def time_ns(self) -> int: ...
    @property
    def host_wait_ns(self) -> int: ...
    @property
    def kernel_wait_ns(self) -> int: ...
    @property
    def other_wait_ns(self) -> int: ...
    @property
    def compute_ns(self) -> int: ...
    @property
    def communication_ns(self) -> int: ...
    @property
    def memcpy_ns(self) -> int: ...
    @property
    def memset_ns(self) -> int: ...


def _shares(total_ns: int, **parts_ns: int) -> dict[str, float]:
    return {name: round(ns / total_ns, 4) if total_ns else 0.0 for name, ns in parts_ns.items()}


def _splits(of: _Split) -> dict[str, dict[str, float]]:
    """Its idle split and its work, each as shares of its time."""
    return {
        "idle_split": _shares(
            of.time_ns,
            host_wait=of.host_wait_ns,
            kernel_wait=of.kernel_wait_ns,
            other=of.other_wait_ns,
        ),
        "work_split": _shares(
            of.time_ns,
            compute=of.compute_ns,
            communication=of.communication_ns,
            memcpy=of.memcpy_ns,
            memset=of.memset_ns,
        ),
    }


def step_rows(facts: RankFacts) -> list[dict[str, Any]]:
    """One row per step: its time, the device's busy share and idle split (unions over the
    rank's devices, as gpu_busy), each device's busy share, its work, kernels and host times."""
    if not facts.steps:
        return []
    origin = facts.steps[0].start_ns
    work = bool(facts.devices)
    return [
        {
            "number": s.number,
            "start_s": round((s.start_ns - origin) / NS_PER_S, 6),
            "time_s": round(s.time_ns / NS_PER_S, 6),
            "gpu_busy": round(s.busy_fraction, 4) if work else None,
            "device_busy": {
                str(d): round(s.busy_ns.get(d, 0) / s.time_ns, 4) if s.time_ns else 0.0
                for d in facts.devices
            },
            **_splits(s),
            "kernels": s.kernels,
            "kernel_median_us": (
                None if s.kernel_median_ns is None else round(s.kernel_median_ns / 1000, 4)
            ),
            "loader_ms": round(s.loader_ns / 1e6, 4),
            "loader_exposed_ms": round(s.loader_exposed_ns / 1e6, 4),
            "sync_ms": round(s.sync_ns / 1e6, 4),
            "optimizer_ms": round(s.optimizer_ns / 1e6, 4),
        }
        for s in facts.steps
    ]


def device_rows(facts: RankFacts) -> dict[str, dict[str, Any]]:
    """Per device: its busy share, idle split and work as shares of the steps' summed time
    (busy and the three idle shares add up to 1), and its kernels a step (mean)."""
    steps = len(facts.steps)
    rows = {}
    for device, d in sorted(facts.device_facts.items()):
        rows[str(device)] = {
            "name": facts.trace.devices.get(device, "GPU"),
            "busy": round(d.busy_ns / d.time_ns, 4) if d.time_ns else 0.0,
            **_splits(d),
            "kernels_per_step": round(d.kernels / steps, 1) if steps else None,
        }
    return rows


def _top_kernels(trace: RankTrace) -> list[KernelTotal]:
    ops = trace.ops
    totals: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    kinds: dict[int, int] = {}
    busy = 0
    for i in range(len(ops)):
        entry = totals[ops.name[i]]
        entry[0] += 1
        entry[1] += ops.end_ns[i] - ops.start_ns[i]
        kinds[ops.name[i]] = ops.kind[i]
        busy += ops.end_ns[i] - ops.start_ns[i]
    ranked = sorted(totals.items(), key=lambda item: -item[1][1])[:TOP_KERNELS]
    return [
        KernelTotal(
            name=trace.names[name],
            kind=OpKind(kinds[name]).name.lower(),
            count=count,
            time_s=round(time_ns / NS_PER_S, 6),
            share=round(time_ns / busy, 4) if busy else 0.0,
        )
        for name, (count, time_ns) in ranked
    ]


def summarise_rank(facts: RankFacts) -> RankSummary:
    steps = facts.steps
    trace = facts.trace
    work = bool(facts.devices)
    comm = sum(s.communication_ns for s in steps)
    return RankSummary(
        rank=trace.rank,
        path=trace.path,
        devices={d: trace.devices.get(d, "GPU") for d in facts.devices},
        steps=len(steps),
        step_markers=facts.marked,
        steps_on_device=facts.on_device,
        step_time_p50_s=_per_step(steps, "time_ns", NS_PER_S),
        gpu_busy=round(1 - _fraction(steps, "idle_ns"), 4) if work else None,
        idle_split={
            "host_wait": _fraction(steps, "host_wait_ns"),
            "kernel_wait": _fraction(steps, "kernel_wait_ns"),
            "other": _fraction(steps, "other_wait_ns"),
        },
        work_split={
            "compute": _fraction(steps, "compute_ns"),
            "communication": _fraction(steps, "communication_ns"),
            "memcpy": _fraction(steps, "memcpy_ns"),
            "memset": _fraction(steps, "memset_ns"),
        },
        comm_overlap=round(sum(s.comm_overlap_ns for s in steps) / comm, 4) if comm else None,
        kernels_per_step=_median([s.kernels for s in steps]),
        kernel_median_us=_per_step(
            [s for s in steps if s.kernel_median_ns is not None], "kernel_median_ns", 1000
        ),
        loader_ms=_mean(steps, "loader_ns", 1e6),
        loader_exposed_ms=_mean(steps, "loader_exposed_ns", 1e6),
        sync_ms=_mean(steps, "sync_ns", 1e6),
        optimizer_ms=_mean(steps, "optimizer_ns", 1e6),
        temporal=_temporal(trace),
        stream_idle=_stream_idle(trace),
        busy_timeline=busy_timeline(facts),
        top_kernels=_top_kernels(trace),
        per_step=step_rows(facts),
        per_device=device_rows(facts),
    )


def _temporal(trace: RankTrace) -> dict[str, float] | None:
    found = temporal(trace, without_last_step(trace))
    return None if found is None else found.shares()


def _stream_idle(trace: RankTrace) -> dict[str, dict[str, float]] | None:
    found = stream_idle(trace, without_last_step(trace))
    return {
        str(stream): {"idle_s": round(idle.total_ns / NS_PER_S, 6), **idle.shares()}
        for stream, idle in found.items()
    } or None


def _phase(name: str, facts: RankFacts, duration_ns: int) -> PhaseStats:
    steps = facts.steps
    time_ns = sum(s.time_ns for s in steps)
    times = [(s.time_ns / NS_PER_S, 1) for s in steps]
    wait_ns = sum(s.loader_exposed_ns for s in steps)
    busy = {
        device: sum(s.busy_ns.get(device, 0) for s in steps) / time_ns if time_ns else 0.0
        for device in facts.devices
    }
    time_s = time_ns / NS_PER_S
    return PhaseStats(
        name=name,
        time_s=time_s,
        share=time_ns / duration_ns if duration_ns else 0.0,
        steps=len(steps),
        step_time_p50_s=weighted_percentile(times, 0.50),
        step_time_p95_s=weighted_percentile(times, 0.95),
        data_wait_s=wait_ns / NS_PER_S,
        data_wait_fraction=wait_ns / time_ns if time_ns and facts.trace.loader else None,
        step_gap_s=0.0,
        rounds=1,
        data_wait_coverage=1.0 if facts.trace.loader else None,
        steady_time_s=time_s if steps else None,
        steady_steps=len(steps),
        steady_data_wait_s=wait_ns / NS_PER_S,
        gpu_util_pct={d: 100 * v for d, v in busy.items()} or None,
        gpu_busy=busy or None,
    )


def _devices(facts: Sequence[RankFacts]) -> list[DeviceStats]:
    seen: dict[int, DeviceStats] = {}
    for rank in facts:
        for device in rank.devices:
            if device in seen:
                continue
            seen[device] = DeviceStats(
                info=DeviceInfo(index=device, name=rank.trace.devices.get(device, "GPU")),
                samples=0,
                util_mean_pct=None,
                sm_active_mean=None,
                memory_used_max_bytes=None,
                job_memory_max_bytes=None,
                job_share=None,
                job_seen=True,
                link_bytes_per_s=None,
            )
    return [seen[d] for d in sorted(seen)]


def diagnose_traces(traces: Sequence[RankTrace]) -> Diagnosis:
    """The report of one job's profiler traces (one per rank, or per host)."""
    source = traces[0].format if traces else "kineto"
    facts = [rank_facts(trace) for trace in traces]
    first = facts[0]
    name = "train" if any(t.backward_seen for t in traces) else "steps"
    spans = [(s.start_ns, s.end_ns) for f in facts for s in f.steps]
    duration_ns = max(e for _, e in spans) - min(s for s, _ in spans) if spans else 0
    phases = {name: _phase(name, first, duration_ns)} if first.steps else {}
    findings: list[Finding] = []
    for rank in facts:
        if not rank.marked:
            findings.extend(f for check in WINDOW_CHECKS if (f := check(rank, name)) is not None)
            continue
        placed = not_on_gpu(rank, name)
        if placed is not None:  # the device idles because nothing runs on it: nothing else to say
            findings.append(placed)
            continue
        partly = cpu_ops_beside_gpu(rank, name)  # some operators left on the CPU
        if partly is not None:
            findings.append(partly)
        for check in CHECKS:
            finding = check(rank, name)
            if finding is not None:
                findings.append(finding)
    imbalance = rank_imbalance([f for f in facts if f.marked], name)
    if imbalance is not None:
        findings.append(imbalance)
    return Diagnosis(
        command=[],
        exit_code=None,
        duration_s=duration_ns / NS_PER_S,
        devices=_devices(facts),
        phases=phases,
        findings=sort_findings(findings),
        framework=Framework.TORCH.value,
        meta={"source": source},
        kernels=KernelReport(
            source=source,
            paths=[t.path for t in traces],
            ranks=[summarise_rank(f) for f in facts],
        ),
    )
