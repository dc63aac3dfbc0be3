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
from gpuwhy.rank_identity import RankIdentity, inherited
from gpuwhy.recording.merged import PID_STRIDE
from gpuwhy.telemetry.nvml import GPU_PROCESS_EVENT, held_gpu
from gpuwhy.wire import PROCESS_EVENT


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


@dataclass
class _Processes:
    """What the events say of the job's processes."""

    identity: dict[int, RankIdentity]
    parent: dict[int, int]
    gpu: dict[int, tuple[int, str | None, int]]  # pid -> (device, uuid, memory)
    syncs: dict[tuple[str, int], int]  # (phase, pid) -> syncs counted

    def identity_of(self, pid: int | None) -> RankIdentity | None:
        return inherited(pid, self.identity, self.parent)


def _processes(events: Iterable[Event]) -> _Processes:
    found = _Processes({}, {}, {}, defaultdict(int))
    for event in events:
        data = event.data
        pid = data.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool):
            continue
        if event.kind == PROCESS_EVENT:
            identity = RankIdentity.from_data(data)
            if identity is not None:
                found.identity[pid] = identity
            ppid = data.get("ppid")
            if isinstance(ppid, int):
                found.parent[pid] = ppid
        elif event.kind == GPU_PROCESS_EVENT:
            held = held_gpu(found.gpu.get(pid), data)
            if held is not None:
                found.gpu[pid] = held
        elif event.kind == "sync" and isinstance(data.get("count"), int):
            found.syncs[(str(data.get("phase") or "train"), pid)] += data["count"]
    return found


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
    known = _processes(events)
    result = {}
    for name, phase in stepped.items():
        during = (gpu or {}).get(name, {})
        rows = [_row(name, process, known, during) for process in phase.processes if process.steps]
        result[name] = tuple(sorted(rows, key=_order))
    return result


def _row(
    phase: str,
    process: ProcessPhase,
    known: _Processes,
    during: Mapping[int, GpuWindowStats],
) -> RankPhase:
    pid = process.pid
    identity = known.identity_of(pid)
    own_pid = None if pid is None else pid % PID_STRIDE  # its pid on its node (merged.py)
    held = known.gpu.get(pid) if pid is not None else None
    device, uuid = (held[0], held[1]) if held is not None else (None, None)
    syncs = known.syncs.get((phase, pid)) if pid is not None else None
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
