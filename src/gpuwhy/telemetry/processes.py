"""Who the job's processes are: the directory both the report (analysis/ranks.py) and the live
metrics (runtime/progress.py) build from the same events.

A hooked process introduces itself once (`wire.PROCESS_EVENT`: pid, parent, its launcher's
rank); NVML says which GPU each of the job's pids holds (`nvml.GPU_PROCESS_EVENT`). A process
with no rank of its own (a DataLoader worker) is its nearest ancestor's; of several GPUs, a
process uses the one where it holds the most memory (`nvml.held_gpu`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuwhy.model import Event
from gpuwhy.rank_identity import RankIdentity, inherited
from gpuwhy.telemetry.nvml import GPU_PROCESS_EVENT, held_gpu
from gpuwhy.wire import PROCESS_EVENT


@dataclass
class ProcessDirectory:
    identity: dict[int, RankIdentity] = field(default_factory=dict)
    parent: dict[int, int] = field(default_factory=dict)
    gpu: dict[int, tuple[int, str | None, int]] = field(default_factory=dict)  # device, uuid, mem

    def observe(self, event: Event) -> None:
        """Take note of a process or GPU-process event; any other event is ignored."""
        data = event.data
        pid = data.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool):
            return
        if event.kind == PROCESS_EVENT:
            identity = RankIdentity.from_data(data)
            if identity is not None:
                self.identity[pid] = identity
            ppid = data.get("ppid")
            if isinstance(ppid, int):
                self.parent[pid] = ppid
        elif event.kind == GPU_PROCESS_EVENT:
            held = held_gpu(self.gpu.get(pid), data)
            if held is not None:
                self.gpu[pid] = held

    def identity_of(self, pid: int | None) -> RankIdentity | None:
        return inherited(pid, self.identity, self.parent)

    def gpu_of(self, pid: int | None) -> tuple[int | None, str | None]:
        """(GPU index, UUID) the process uses; (None, None) where NVML never saw it."""
        held = self.gpu.get(pid) if pid is not None else None
        return (held[0], held[1]) if held is not None else (None, None)
