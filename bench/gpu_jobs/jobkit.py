"""What every GPU-truth job shares: its command line, its own clock, its truth file, its profile.

A job measures itself, so the truth a capture is checked against never comes from gpuwhy: the
wall time of its training loop after warm-up (the steady state), of each phase, the steps and
samples it ran. GPU work is asynchronous, so every reading of the clock that closes a phase
waits for the device first (`sync`).

    python bench/gpu_jobs/<job>.py [--fixed] [--size gpu|tiny] [--truth FILE] [--profile FILE]

`--size tiny` is the dry run's: seconds on a CPU. `--profile FILE` also writes a short trace of
a few steps with the framework's own profiler (gzipped Chrome trace for PyTorch; a zip of
jax.profiler's output for JAX); a profiler that fails is noted in the truth, not fatal.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROFILE_STEPS = 6  # steps in a profile: enough to show the pattern, small enough to commit


@dataclass
class Job:
    """One run of a job: its arguments and what it measured."""

    fixed: bool
    tiny: bool
    truth_path: Path | None
    profile_path: Path | None
    facts: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    _sync: Callable[[], None] = lambda: None

    def size(self, gpu: Any, tiny: Any) -> Any:
        """The value for this run's size preset."""
        return tiny if self.tiny else gpu

    def use_sync(self, sync: Callable[[], None]) -> None:
        """How to wait for the device's queued work before reading the clock."""
        self._sync = sync

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a phase (summed when entered again), waiting for the device at both ends."""
        self._sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            self._sync()
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start

    def write(self) -> None:
        """The truth file: the variant, the phases' seconds and the job's own facts."""
        if self.truth_path is None:
            return
        document = {
            "variant": "fixed" if self.fixed else "slow",
            "size": "tiny" if self.tiny else "gpu",
            "phases_s": {k: round(v, 6) for k, v in self.phases.items()},
            **self.facts,
        }
        self.truth_path.write_text(json.dumps(document, indent=1, sort_keys=True))


def start(description: str) -> Job:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--fixed", action="store_true", help="run the fixed variant")
    parser.add_argument("--size", choices=("gpu", "tiny"), default="gpu")
    parser.add_argument("--truth", type=Path, help="write the job's own timings here (JSON)")
    parser.add_argument("--profile", type=Path, help="also write a short profiler trace here")
    args = parser.parse_args()
    return Job(args.fixed, args.size == "tiny", args.truth, args.profile)


def torch_device(job: Job) -> str:
    """The CUDA device where there is one (the sync is set for it), else the CPU."""
    import torch

    if torch.cuda.is_available():
        job.use_sync(torch.cuda.synchronize)
        job.facts["device"] = torch.cuda.get_device_name(0)
        return "cuda"
    job.facts["device"] = "cpu"
    if job.tiny:
        # A dry run shares the CPU's cores with other work (CI runs it beside other tests): with
        # one intra-op thread, not OpenMP's barriers waiting on a descheduled second one (the
        # tiny-batch job's step took ~110 ms instead of ~1.5 ms beside a busy core).
        torch.set_num_threads(1)
    return "cpu"


@contextlib.contextmanager
def torch_profile(job: Job, *, by_step: bool = True) -> Iterator[Callable[[], None]]:
    """torch.profiler when --profile is given; yields `step()`. By step: PROFILE_STEPS steps
    after one to wait and one to warm up; otherwise the whole block (steps the job does not
    drive itself, as in Keras' `fit`)."""
    if job.profile_path is None:
        yield lambda: None
        return
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    plan = schedule(wait=1, warmup=1, active=PROFILE_STEPS, repeat=1) if by_step else None
    with profile(activities=activities, schedule=plan) as prof:
        yield prof.step if by_step else (lambda: None)
    with tempfile.TemporaryDirectory() as folder:
        raw = Path(folder, "trace.json")
        try:
            prof.export_chrome_trace(str(raw))
            _gzip(raw, job.profile_path)
        except Exception as error:  # a profiler failure must not lose the run's truth
            job.facts["profile_error"] = f"{type(error).__name__}: {error}"


@contextlib.contextmanager
def jax_profile(job: Job) -> Iterator[None]:
    """jax.profiler around the block when --profile is given, saved as one zip file."""
    if job.profile_path is None:
        yield
        return
    import jax

    with tempfile.TemporaryDirectory() as folder:
        try:
            jax.profiler.start_trace(folder, create_perfetto_trace=True)
        except Exception as error:  # a profiler failure must not lose the run's truth
            job.facts["profile_error"] = f"{type(error).__name__}: {error}"
            yield
            return
        try:
            yield
        finally:
            try:
                jax.profiler.stop_trace()
                written = shutil.make_archive(
                    str(Path(folder).with_suffix(".packed")), "zip", root_dir=folder
                )
                shutil.move(written, job.profile_path)
            except Exception as error:
                job.facts["profile_error"] = f"{type(error).__name__}: {error}"


def mlp(width: int, depth: int, inputs: int, outputs: int) -> Any:
    """A plain multi-layer perceptron: matrix products, the GPU's bread and butter."""
    import torch

    layers: list[Any] = [torch.nn.Linear(inputs, width), torch.nn.ReLU()]
    for _ in range(depth - 1):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(width, outputs))
    return torch.nn.Sequential(*layers)


def _gzip(source: Path, target: Path) -> None:
    with source.open("rb") as raw, gzip.open(target, "wb", compresslevel=9) as packed:
        shutil.copyfileobj(raw, packed)


def slow_io(seconds: float) -> None:
    """Stand-in for a slow read from storage: the time passes without using the CPU."""
    time.sleep(seconds)


def cpu_threads() -> int:
    return len(os.sched_getaffinity(0))
