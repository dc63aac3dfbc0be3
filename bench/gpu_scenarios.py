"""The GPU-truth scenarios: each a job in bench/gpu_jobs/ with a slow variant and its fix, what it
proves, and the part of the capture it runs in (each part must fit one command on the GPU
machine: see bench/README.md for the time plan)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

JOBS = Path(__file__).resolve().parent / "gpu_jobs"
# JAX takes 75 % of the GPU's memory at start unless told not to: two runs beside each other
# (gpuwhy's probe, two processes) would fail.
JAX_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


@dataclass(frozen=True)
class Scenario:
    name: str
    job: str
    part: int
    proves: str
    framework: str  # "torch" or "jax": which profiler traces it, which probe doctor makes
    # The finding gpuwhy should lead with on the slow variant; "GPU_BOUND" (healthy, an info)
    # for the control; None where gpuwhy has no finding for the case yet (the capture shows
    # what it says instead).
    expected: str | None
    env: dict[str, str] = field(default_factory=dict)
    # Whether its job runs the framework's profiler under --profile (jobkit.torch_profile /
    # jax_profile): a job without one gets no profiled run, which would only repeat the slow one.
    profiler: bool = True

    @property
    def script(self) -> Path:
        return JOBS / self.job


SCENARIOS = (
    Scenario(
        "healthy",
        "healthy.py",
        1,
        "control: GPU busy ≥ 90 %, no bottleneck finding",
        "torch",
        "GPU_BOUND",
    ),
    Scenario(
        "torch_loader",
        "torch_loader.py",
        1,
        "DataLoader input-bound (slow __getitem__, num_workers=0) vs workers + pinned memory",
        "torch",
        "INPUT_BOUND",
    ),
    Scenario(
        "tiny_batch",
        "torch_tiny_batch.py",
        1,
        "launch-bound tiny batches vs a batch 16× larger",
        "torch",
        "HOST_BOUND",
    ),
    Scenario(
        "item_sync",
        "torch_sync.py",
        1,
        ".item()/.cpu() sync every step vs none",
        "torch",
        "SYNC_BOUND",
    ),
    Scenario(
        "cpu_model",
        "torch_cpu_model.py",
        1,
        "model left on the CPU while a GPU is visible vs on the GPU",
        "torch",
        "NOT_ON_GPU",
    ),
    Scenario(
        "slow_validation",
        "torch_slow_validation.py",
        1,
        "slow validation (host-side metric, slow reads) vs on-device metric",
        "torch",
        "SLOW_VALIDATION",
        profiler=False,
    ),
    Scenario(
        "pageable_copy",
        "torch_pageable.py",
        2,
        "pageable host→device copies vs pinned, non-blocking, one step ahead",
        "torch",
        "PAGEABLE_COPY",
    ),
    Scenario(
        "keras_torch",
        "keras_slow_input.py",
        2,
        "Keras fit on the torch backend, slow PyDataset vs eight reader threads",
        "torch",
        "INPUT_BOUND",
        {"KERAS_BACKEND": "torch"},
    ),
    Scenario(
        "keras_jax",
        "keras_slow_input.py",
        2,
        "Keras fit on the JAX backend, slow PyDataset vs eight reader threads",
        "jax",
        "INPUT_BOUND",
        {"KERAS_BACKEND": "jax", **JAX_ENV},
    ),
    Scenario(
        "jax_host_input",
        "jax_host_input.py",
        2,
        "JAX loop with a serial host-side input pipeline vs reading ahead on threads",
        "jax",
        "INPUT_BOUND",
        JAX_ENV,
    ),
    Scenario(
        "two_procs",
        "two_procs.py",
        2,
        "two processes sharing the one GPU vs one alone",
        "torch",
        None,
        profiler=False,
    ),
    Scenario(
        "alloc_idle",
        "alloc_idle.py",
        2,
        "GPU memory held while the GPU idles vs released first",
        "torch",
        None,
        profiler=False,
    ),
)
BY_NAME = {s.name: s for s in SCENARIOS}
# A dry run profiles one scenario per profiler path alone: torch by step, torch around Keras'
# fit, JAX around Keras' fit, JAX around a plain loop (the other jobs call the same jobkit code).
DRY_PROFILED = ("torch_loader", "keras_torch", "keras_jax", "jax_host_input")
PARTS = (1, 2, 3)  # part 3: doctor, the gpu-marked tests, sampler cost, overhead
