"""diagnose(recording) -> Diagnosis: phases, GPUs lined up with them, findings most valuable first.

Record, analyse, render: this is the middle step. It reads the recording through its streaming
reader (spans once, GPU/util/host samples once each), builds the `RunContext` the rules read, and
returns one frozen `Diagnosis` every reporter renders. Nothing here prints.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gpuwhy.analysis.alignment import ACTIVE, RUN, GpuWindowStats
from gpuwhy.analysis.blind_spots import BlindSpot, find_blind_spots
from gpuwhy.analysis.context import PageableCopies, RunContext
from gpuwhy.analysis.framework import Framework, detect
from gpuwhy.analysis.hostwindows import host_window_stats
from gpuwhy.analysis.inputs import phase_inputs
from gpuwhy.analysis.intervals import Interval, union
from gpuwhy.analysis.phases import OTHER, CollectedPhases, PhaseStats, other_intervals
from gpuwhy.analysis.ranks import RankPhase, rank_phases
from gpuwhy.analysis.rules import run_rules
from gpuwhy.analysis.rules.transfer import link_bandwidth_bytes_per_s
from gpuwhy.analysis.workers import Aligner, Workers
from gpuwhy.model import NS_PER_S, DeviceInfo, Event, Finding, Severity, SpanKind, sort_findings
from gpuwhy.redact import command_is_raw, recorded_command
from gpuwhy.wire import COPY_EVENT, CORE_WAIT_EVENT, GC_EVENT, RETRACE_EVENT

if TYPE_CHECKING:
    from gpuwhy.recording.reader import Recording


@dataclass(frozen=True)
class DeviceStats:
    """One GPU over the run: what it is and how the job used it while the phases ran."""

    info: DeviceInfo
    samples: int
    util_mean_pct: float | None  # while any phase ran (the whole run if none was recorded)
    sm_active_mean: float | None
    memory_used_max_bytes: int | None
    job_memory_max_bytes: int | None
    job_share: float | None  # the job's part of the GPU's busy time
    job_seen: bool | None
    link_bytes_per_s: float | None  # one direction of the PCIe link at its max gen x width


@dataclass(frozen=True)
class Diagnosis:
    """Everything a report shows about one run."""

    command: list[str]
    exit_code: int | None
    duration_s: float
    devices: list[DeviceStats]
    phases: dict[str, PhaseStats]  # named phases in order, then "data_wait", "other"
    findings: list[Finding]  # runtime findings, most valuable first
    environment: Mapping[str, Any] = field(default_factory=dict)  # {"facts", "findings", ...}
    environment_findings: list[Finding] = field(default_factory=list)
    framework: str = Framework.UNKNOWN.value
    complete: bool = True
    meta: Mapping[str, Any] = field(default_factory=dict)
    command_raw: bool = False  # recorded with `gpuwhy run --no-redact`: credentials not masked
    # From profiler traces (analysis/kernels): a KernelReport with each rank's kernel-level figures.
    kernels: Any = None
    # phase -> a row per rank, where several processes stepped in it (analysis/ranks.py)
    ranks: Mapping[str, tuple[RankPhase, ...]] = field(default_factory=dict)
    blind_spots: tuple[BlindSpot, ...] = ()  # what the job's hooks said they could not see

    @property
    def worst_severity(self) -> Severity | None:
        everything = [*self.findings, *self.environment_findings]
        return min((f.severity for f in everything), key=lambda s: s.rank, default=None)


def _environment_findings(environment: Mapping[str, Any]) -> list[Finding]:
    raw = environment.get("findings")
    if raw is None and environment.get("facts") is not None:
        return _evaluate(environment["facts"])
    findings = []
    for item in raw or []:
        if isinstance(item, Finding):
            findings.append(item)
        elif isinstance(item, Mapping):
            try:
                findings.append(Finding.from_dict(item))
            except (KeyError, ValueError):
                continue  # a finding of a newer gpuwhy with fields we cannot read
    return sort_findings(findings)


def _evaluate(facts: Any) -> list[Finding]:
    """The doctor's rules on facts recorded without their findings."""
    evaluate = getattr(importlib.import_module("gpuwhy.env"), "evaluate", None)
    if evaluate is None or not isinstance(facts, Mapping):
        return []
    return sort_findings(list(evaluate(facts)))


@dataclass
class _EventFacts:
    events: list[Event] = field(default_factory=list)
    syncs: dict[str, int] = field(default_factory=dict)  # phase -> device-to-host syncs
    synced_steps: dict[str, int] = field(default_factory=dict)  # phase -> steps that synced
    copies: dict[str, PageableCopies] = field(default_factory=dict)  # phase -> pageable copies
    # pid -> its full garbage collections (hooks/gc_pauses.py), in order
    pauses: dict[int | None, list[Interval]] = field(default_factory=dict)
    # pid -> its main thread's (t_ns, run_ns, queued_ns) readings (hooks/core_waits.py), in order
    threads: dict[int | None, list[tuple[int, int, int]]] = field(default_factory=dict)
    # pid -> its calls that traced or compiled a step function again (RETRACE_EVENT), in order
    traces: dict[int | None, list[Interval]] = field(default_factory=dict)


def _event_facts(events: Iterable[Event]) -> _EventFacts:
    facts = _EventFacts()
    for event in events:
        facts.events.append(event)
        phase = event.data.get("phase")
        if event.kind == "sync":
            count = event.data.get("count", 1)
            key = str(phase or "train")
            facts.syncs[key] = facts.syncs.get(key, 0) + (count if isinstance(count, int) else 1)
            steps = event.data.get("steps")
            if isinstance(steps, int):  # hooks that count per step say how many steps synced
                facts.synced_steps[key] = facts.synced_steps.get(key, 0) + steps
        elif event.kind == COPY_EVENT:
            count, ns, size = (event.data.get(k) for k in ("count", "ns", "bytes"))
            if isinstance(count, int) and isinstance(ns, int) and isinstance(size, int):
                key = str(phase or "train")
                seen = facts.copies.get(key, PageableCopies(0, 0.0, 0))
                facts.copies[key] = PageableCopies(
                    seen.count + count, seen.seconds + ns / 1e9, seen.bytes + size
                )
        elif event.kind == CORE_WAIT_EVENT:
            pid, run, queued = (event.data.get(k) for k in ("pid", "run_ns", "queued_ns"))
            if isinstance(pid, int) and isinstance(run, int) and isinstance(queued, int):
                facts.threads.setdefault(pid, []).append((event.t_ns, run, queued))
        elif event.kind in (GC_EVENT, RETRACE_EVENT):
            duration = event.data.get("duration_ns")
            pid = event.data.get("pid")
            if isinstance(duration, int) and duration > 0 and isinstance(pid, int):
                timed = facts.pauses if event.kind == GC_EVENT else facts.traces
                timed.setdefault(pid, []).append((event.t_ns, event.t_ns + duration))
    for readings in facts.threads.values():
        readings.sort()
    for traces in facts.traces.values():
        traces.sort()
    return facts


def _with_gpu(
    phases: dict[str, PhaseStats],
    gpu: Mapping[str, Mapping[int, GpuWindowStats]],
) -> dict[str, PhaseStats]:
    result = {}
    for name, phase in phases.items():
        during = gpu.get(name, {})
        util = {d: s.util_mean_pct for d, s in during.items() if s.util_mean_pct is not None}
        sm = {d: s.sm_active_mean for d, s in during.items() if s.sm_active_mean is not None}
        result[name] = replace(phase, gpu_util_pct=util or None, sm_active=sm or None)
    return result


def _devices(
    devices: Sequence[DeviceInfo],
    gpu: Mapping[str, Mapping[int, GpuWindowStats]],
) -> list[DeviceStats]:
    whole = gpu.get(RUN, {})
    active = gpu.get(ACTIVE) or whole
    result = []
    for info in devices:
        run_stats = whole.get(info.index)
        stats = active.get(info.index) or run_stats
        result.append(
            DeviceStats(
                info=info,
                samples=run_stats.samples if run_stats else 0,
                util_mean_pct=stats.util_mean_pct if stats else None,
                sm_active_mean=stats.sm_active_mean if stats else None,
                memory_used_max_bytes=run_stats.memory_used_max_bytes if run_stats else None,
                job_memory_max_bytes=run_stats.job_memory_max_bytes if run_stats else None,
                job_share=stats.job_share if stats else None,
                job_seen=run_stats.job_seen if run_stats else None,
                link_bytes_per_s=link_bandwidth_bytes_per_s(info.pcie_gen_max, info.pcie_width_max),
            )
        )
    return result


def _windows(
    named: Mapping[str, list[Interval]], start_ns: int, end_ns: int
) -> dict[str, list[Interval]]:
    """The time ranges the GPUs are summarised over: each phase's, the run's time in none,
    the whole run and the time in any phase."""
    return {
        **named,
        OTHER: other_intervals(named.values(), start_ns, end_ns),
        RUN: [(start_ns, end_ns)] if end_ns > start_ns else [],
        ACTIVE: union(i for intervals in named.values() for i in intervals),
    }


def diagnose(
    recording: Recording,
    *,
    environment: Mapping[str, Any] | None = None,
    workers: Workers | None = None,
) -> Diagnosis:
    """Analyse a recording: per-phase statistics, GPU alignment and runtime findings.

    ``environment`` is the doctor's ``{"facts": ..., "findings": [...]}`` for the job's
    interpreter; it defaults to the one `gpuwhy run` stored in the recording's meta.
    ``workers`` (workers.py; `Workers(worker_count(recording))` for a recording long enough to
    gain from them) align the GPUs with the phases; the caller closes them.
    """
    aligner = Aligner(recording, workers or Workers(0))
    meta = dict(recording.meta)
    if environment is None:
        stored = meta.get("environment")
        environment = stored if isinstance(stored, Mapping) else {}
    env_findings = _environment_findings(environment)
    facts = environment.get("facts")
    facts = facts if isinstance(facts, Mapping) else {}

    start_ns, end_ns = recording.run_bounds() or (0, 0)
    duration_s = (end_ns - start_ns) / NS_PER_S
    event_facts = _event_facts(recording.events())
    # The GPUs are lined up with the phases (stored tiers; raw samples only where a bound cuts)
    # while the steps are read and their statistics computed: the phases' marks come first.
    collected = CollectedPhases.read(recording, SpanKind.PHASE)
    marked = collected.intervals()
    aligner.start(_windows(marked, start_ns, end_ns))
    collected.add(recording, SpanKind.STEP)
    collected.add(recording, SpanKind.WAIT)
    named = collected.intervals()
    windows = _windows(named, start_ns, end_ns)
    if named != marked:  # a phase known only by its steps: its extent is theirs
        aligner.start(windows)
    phases = collected.stats(
        start_ns, end_ns, event_facts.pauses, event_facts.threads, event_facts.traces
    )
    started = aligner.result()
    gpu = {name: started[name] for name in windows}  # the phases' order may have changed
    host = host_window_stats(windows, recording)
    framework = detect(event_facts.events, facts)
    phases = _with_gpu(phases, gpu)
    ranks = rank_phases(phases, event_facts.events, gpu)

    ctx = RunContext(
        duration_s=duration_s,
        phases=phases,
        devices=list(recording.devices),
        gpu=gpu,
        framework=framework,
        host=host,
        environment_facts=facts,
        environment_findings=env_findings,
        sync_counts=event_facts.syncs,
        synced_steps=event_facts.synced_steps,
        pageable_copies=event_facts.copies,
        ranks=ranks,
        inputs=phase_inputs(event_facts.events, phases),
    )
    exit_code = meta.get("exit_code")
    return Diagnosis(
        command=recorded_command(meta),
        command_raw=command_is_raw(meta),
        exit_code=exit_code if isinstance(exit_code, int) else None,
        duration_s=duration_s,
        devices=_devices(recording.devices, gpu),
        phases=phases,
        findings=sort_findings(run_rules(ctx)),
        environment=environment,
        environment_findings=env_findings,
        framework=framework.value,
        complete=recording.complete,
        meta=meta,
        ranks=ranks,
        blind_spots=find_blind_spots(event_facts.events),
    )
