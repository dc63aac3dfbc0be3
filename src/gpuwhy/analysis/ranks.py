"""Per-rank figures of a data-parallel job: which process is which rank, and what each did.

Every hooked process introduces itself when it connects (`wire.PROCESS_EVENT`: pid, parent,
and the rank its launcher gave it, rank_identity.py); NVML says which GPU each of the job's
processes holds (`telemetry.nvml.GPU_PROCESS_EVENT`, by UUID). The phases keep each stepping
process's own steps and waits (`PhaseStats.processes`). Here they meet: for each phase that
several processes stepped in, one row per rank with its steps, step time, input wait per step,
syncs per step and the GPU it used. A process the launcher gave no rank (a DataLoader worker
that stepped, a job's own `multiprocessing`) keeps its pid as its name, or its parent's rank.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpuwhy.analysis.alignment import GpuWindowStats
from gpuwhy.analysis.phases import PhaseStats, ProcessPhase
from gpuwhy.model import Event
from gpuwhy.rank_identity import RankIdentity
from gpuwhy.recording.merged import PID_STRIDE
from gpuwhy.telemetry.processes import ProcessDirectory


@dataclass(frozen=True)
class RankPhase:
    """One rank's part of one phase."""

    label: str  # "rank 3", or "pid 4242" where no launcher named it
    pid: int | None  # on its own node
    identity: RankIdentity | None
    steps: int
    steady_steps: int
    step_time_p50_s: float | None
    step_time_p95_s: float | None
    cycle_s: float | None  # steady wall time per step, its input wait included
    wait_per_step_s: float | None  # None: its input was not timed
    syncs_per_step: float | None  # None: its hooks counted none in this phase
    device: int | None = None  # the GPU NVML saw this process on (None: none, or no NVML)
    gpu_uuid: str | None = None
    gpu_util_pct: float | None = None  # that GPU's mean utilization during the phase

    @property
    def rank(self) -> int | None:
        return None if self.identity is None else self.identity.rank

    @property
    def host(self) -> str | None:
        return None if self.identity is None else self.identity.host

    @property
    def wait_fraction(self) -> float | None:
        if self.wait_per_step_s is None or not self.cycle_s:
            return None
        return min(self.wait_per_step_s / self.cycle_s, 1.0)


def _processes(events: Iterable[Event]) -> tuple[ProcessDirectory, dict[tuple[str, int], int]]:
    """Who each process is, and (phase, pid) -> the syncs its hooks counted."""
    directory = ProcessDirectory()
    syncs: dict[tuple[str, int], int] = defaultdict(int)
    for event in events:
        directory.observe(event)
        pid, count = event.data.get("pid"), event.data.get("count")
        if event.kind == "sync" and isinstance(pid, int) and isinstance(count, int):
            syncs[(str(event.data.get("phase") or "train"), pid)] += count
    return directory, syncs


def rank_phases(
    phases: Mapping[str, PhaseStats],
    events: Iterable[Event],
    gpu: Mapping[str, Mapping[int, GpuWindowStats]] | None = None,
) -> dict[str, tuple[RankPhase, ...]]:
    """For each phase that two or more processes stepped in, a row per rank, by rank."""
    stepped = {
        name: phase
        for name, phase in phases.items()
        if not phase.is_pseudo and sum(1 for p in phase.processes if p.steps) >= 2
    }
    if not stepped:
        return {}
    known, syncs = _processes(events)
    result = {}
    for name, phase in stepped.items():
        during = (gpu or {}).get(name, {})
        rows = [
            _row(name, process, known, syncs, during)
            for process in phase.processes
            if process.steps
        ]
        result[name] = tuple(sorted(rows, key=_order))
    return result


def _row(
    phase: str,
    process: ProcessPhase,
    known: ProcessDirectory,
    counted: Mapping[tuple[str, int], int],
    during: Mapping[int, GpuWindowStats],
) -> RankPhase:
    pid = process.pid
    identity = known.identity_of(pid)
    own_pid = None if pid is None else pid % PID_STRIDE  # its pid on its node (merged.py)
    device, uuid = known.gpu_of(pid)
    syncs = counted.get((phase, pid)) if pid is not None else None
    util = during[device].util_mean_pct if device is not None and device in during else None
    return RankPhase(
        label=f"rank {identity.rank}" if identity is not None else f"pid {own_pid}",
        pid=own_pid,
        identity=identity,
        steps=process.steps,
        steady_steps=process.steady_steps,
        step_time_p50_s=process.step_time_p50_s,
        step_time_p95_s=process.step_time_p95_s,
        cycle_s=process.cycle_s,
        wait_per_step_s=process.wait_per_step_s,
        syncs_per_step=syncs / process.steps if syncs and process.steps else None,
        device=device,
        gpu_uuid=uuid,
        gpu_util_pct=util,
    )


def _order(row: RankPhase) -> tuple[int, int, int]:
    if row.identity is not None:
        return (0, row.identity.rank, row.pid or 0)
    return (1, 0, row.pid or 0)
