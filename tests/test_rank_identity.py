"""A process's rank from its launcher's environment: each launcher's variables as it sets them."""

from __future__ import annotations

import json

import pytest

from gpuwhy.rank_identity import RankIdentity, identify

# The variables each launcher sets in a rank's environment, as documented by it
# (docs/references.md#launcher-environment).
TORCHRUN = {
    "RANK": "5",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "8",
    "LOCAL_WORLD_SIZE": "4",
    "GROUP_RANK": "1",
    "TORCHELASTIC_RUN_ID": "job42",
    "MASTER_ADDR": "127.0.0.1",
}
SRUN = {
    "SLURM_JOB_ID": "9001",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "6",
    "SLURM_LOCALID": "2",
    "SLURM_NODEID": "1",
    "SLURM_NTASKS": "8",
}
OPEN_MPI = {
    "OMPI_COMM_WORLD_RANK": "3",
    "OMPI_COMM_WORLD_SIZE": "4",
    "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    "OMPI_COMM_WORLD_NODE_RANK": "1",
}
HYDRA = {"PMI_RANK": "2", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0"}


def tf_config(kind: str, index: int, *, chief: bool = True) -> dict[str, str]:
    cluster: dict[str, list[str]] = {"worker": ["w0:1", "w1:1", "w2:1"], "ps": ["p0:1"]}
    if chief:
        cluster["chief"] = ["c0:1"]
    return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        (TORCHRUN, RankIdentity("torchrun", 5, 8, 1, 1, "job42", "h")),
        (SRUN, RankIdentity("slurm", 6, 8, 2, 1, "9001", "h")),
        (OPEN_MPI, RankIdentity("mpi", 3, 4, 1, 1, None, "h")),
        (HYDRA, RankIdentity("mpi", 2, 4, 0, None, None, "h")),
        # torchrun started by srun: ranks are torchrun's, the node and job SLURM's where
        # torchrun does not say them.
        (
            {**SRUN, **{k: v for k, v in TORCHRUN.items() if k not in ("GROUP_RANK",)}},
            RankIdentity("torchrun", 5, 8, 1, 1, "job42", "h"),
        ),
        (tf_config("chief", 0), RankIdentity("tf_config", 0, 4, host="h")),
        (tf_config("worker", 2), RankIdentity("tf_config", 3, 4, host="h")),
        (tf_config("worker", 2, chief=False), RankIdentity("tf_config", 2, 3, host="h")),
    ],
)
def test_each_launcher_names_the_rank(environ: dict[str, str], expected: RankIdentity) -> None:
    assert identify(environ, host="h") == expected


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"RANK": "1"},  # a lone RANK is too common a variable name to mean torchrun
        {"SLURM_PROCID": "0", "SLURM_JOB_ID": "7"},  # the batch script's shell, no task of a step
        {"RANK": "x", "WORLD_SIZE": "2"},
        tf_config("ps", 0),  # a parameter server trains no replica
        {"TF_CONFIG": "{not json"},
        {"TF_CONFIG": json.dumps({"task": {"type": "worker"}})},
    ],
)
def test_no_rank_where_no_launcher_gave_one(environ: dict[str, str]) -> None:
    assert identify(environ, host="h") is None


def test_identity_survives_the_wire() -> None:
    identity = RankIdentity("torchrun", 5, 8, 1, 1, "job42", "h")
    data = json.loads(json.dumps(identity.to_data()))
    assert RankIdentity.from_data({**data, "pid": 12}) == identity
    assert RankIdentity.from_data({"pid": 12, "ppid": 1}) is None
    assert RankIdentity.from_data({"rank": True, "launcher": "mpi"}) is None
