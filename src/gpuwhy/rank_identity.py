"""Which rank of a distributed job a process is, read from its launcher's environment.

Launchers tell each process who it is through environment variables, set before the job's
first line runs (references.md#launcher-environment): torchrun/torchelastic (`RANK`,
`LOCAL_RANK`, `WORLD_SIZE`, `GROUP_RANK`, `TORCHELASTIC_RUN_ID`), Open MPI
(`OMPI_COMM_WORLD_*`), MPICH/Intel MPI/Hydra (`PMI_RANK`, `PMI_SIZE`, `MPI_LOCALRANKID`),
SLURM's `srun` (`SLURM_PROCID`, `SLURM_LOCALID`, `SLURM_NTASKS`, `SLURM_NODEID`,
`SLURM_JOB_ID`), and TensorFlow's `TF_CONFIG` (a cluster spec and this task's type and index).
The most specific launcher wins: torchrun started by `srun` gives ranks by torchrun's numbering,
the node by SLURM's. Each hooked process sends its identity once, when it connects
(`wire.PROCESS_EVENT`); the analysis groups processes into ranks by it. Pure: no framework is
imported and nothing is asked of the network.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class RankIdentity:
    """One process's place in a distributed job; None where its launcher does not say."""

    launcher: str  # "torchrun", "mpi", "slurm", "tf_config"
    rank: int
    world_size: int | None = None
    local_rank: int | None = None
    node: int | None = None  # the node's index in the job (torchrun's group rank, SLURM node id)
    job: str | None = None  # the launcher's id of the job (run id, SLURM job id)
    host: str | None = None

    def to_data(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RankIdentity | None:
        """The identity a process event carries; None where it names no rank."""
        rank = _int(data.get("rank"))
        launcher = data.get("launcher")
        if rank is None or not isinstance(launcher, str):
            return None
        job, host = data.get("job"), data.get("host")
        return cls(
            launcher=launcher,
            rank=rank,
            world_size=_int(data.get("world_size")),
            local_rank=_int(data.get("local_rank")),
            node=_int(data.get("node")),
            job=job if isinstance(job, str) else None,
            host=host if isinstance(host, str) else None,
        )


def identify(environ: Mapping[str, str], *, host: str | None = None) -> RankIdentity | None:
    """This process's rank from the launcher's variables in `environ`; None if it has none."""
    host = host if host is not None else _hostname()
    slurm_node = _int(environ.get("SLURM_NODEID"))
    slurm_job = environ.get("SLURM_JOB_ID") or None
    for launcher, read in _LAUNCHERS:
        found = read(environ)
        if found is None:
            continue
        rank, world, local, node, job = found
        return RankIdentity(
            launcher=launcher,
            rank=rank,
            world_size=world,
            local_rank=local,
            node=node if node is not None else slurm_node,
            job=job or slurm_job,
            host=host,
        )
    return None


def inherited(
    pid: int | None, identities: Mapping[int, RankIdentity], parents: Mapping[int, int]
) -> RankIdentity | None:
    """The identity of ``pid``, or of its nearest ancestor that has one: a DataLoader worker or
    a job's own pool process belongs to the rank that started it."""
    seen: set[int] = set()
    while pid is not None and pid not in seen:
        seen.add(pid)
        if pid in identities:
            return identities[pid]
        pid = parents.get(pid)
    return None


_Found = tuple[int, int | None, int | None, int | None, str | None]  # rank, world, local, node, job


def _torchrun(env: Mapping[str, str]) -> _Found | None:
    rank = _int(env.get("RANK"))
    if rank is None or _int(env.get("WORLD_SIZE")) is None:
        return None  # a lone RANK is too common a name to trust
    return (
        rank,
        _int(env.get("WORLD_SIZE")),
        _int(env.get("LOCAL_RANK")),
        _int(env.get("GROUP_RANK")),
        env.get("TORCHELASTIC_RUN_ID") or None,
    )


def _mpi(env: Mapping[str, str]) -> _Found | None:
    rank = _int(env.get("OMPI_COMM_WORLD_RANK"))
    if rank is not None:
        return (
            rank,
            _int(env.get("OMPI_COMM_WORLD_SIZE")),
            _int(env.get("OMPI_COMM_WORLD_LOCAL_RANK")),
            _int(env.get("OMPI_COMM_WORLD_NODE_RANK")),
            None,
        )
    rank = _int(env.get("PMI_RANK"))
    if rank is None:
        return None
    return (rank, _int(env.get("PMI_SIZE")), _int(env.get("MPI_LOCALRANKID")), None, None)


def _slurm(env: Mapping[str, str]) -> _Found | None:
    rank = _int(env.get("SLURM_PROCID"))
    if rank is None or _int(env.get("SLURM_STEP_ID")) is None:
        return None  # a batch script's own shell has SLURM_PROCID=0 but is no task of a step
    return (
        rank,
        _int(env.get("SLURM_NTASKS")) or _int(env.get("SLURM_NPROCS")),
        _int(env.get("SLURM_LOCALID")),
        _int(env.get("SLURM_NODEID")),
        env.get("SLURM_JOB_ID") or None,
    )


def _tf_config(env: Mapping[str, str]) -> _Found | None:
    raw = env.get("TF_CONFIG")
    if not raw:
        return None
    try:
        config = json.loads(raw)
        cluster, task = config["cluster"], config["task"]
        kind, index = str(task["type"]), int(task["index"])
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(cluster, Mapping):
        return None
    # TensorFlow's own task order: the chief first, then the workers (MultiWorkerMirroredStrategy
    # numbers them so); parameter servers and evaluators train no replica and take no rank.
    trainers = [name for name in ("chief", "worker") if isinstance(cluster.get(name), list)]
    if kind not in trainers:
        return None
    offset = sum(len(cluster[name]) for name in trainers[: trainers.index(kind)])
    world = sum(len(cluster[name]) for name in trainers)
    return (offset + index, world, None, None, None)


_LAUNCHERS = (("torchrun", _torchrun), ("mpi", _mpi), ("slurm", _slurm), ("tf_config", _tf_config))


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _hostname() -> str | None:
    try:
        return socket.gethostname() or None
    except OSError:
        return None
