"""INPUT_BOUND's words for the pipeline the job has: how its batches are made now, and the fix
that changes that (the description comes from the hooks: analysis/inputs.py).

Made in the loop (`DataLoader(num_workers=0)`): the step waits for every batch's whole making,
and loading beside the step removes all of the wait. Made beside the steps (workers, a parallel
tf.data map) and the steps still wait: the pipeline makes batches slower than the steps use them,
and only the wait left exposed is removable; the fix is more of the parallelism the job already
has, or less work per batch, not parallelism it has already. Python in the pipeline (a generator,
`py_function`) runs one call at a time under the interpreter's lock, beside the loop's own Python.

Parallel loading needs free cores. Where the job's processes already keep most of the cores they
may use busy (the host sampler's CPU time of the process tree, against the cores the hooks saw:
affinity and container quota), the input's work spread over more workers still has to share
them with the step: whatever the workers, a step cannot take less than the job's CPU time per
step over the cores (`core_budget`). Measured on a 2-core machine (tests/scenarios/
test_busy_cores.py, docs/data-wait.md "Busy cores"): a DataLoader whose batches cost 10 ms of
CPU each beside a ~3 ms step waits ~76 % of its time with `num_workers=0`, so the batch made
free is ~4.4× faster, but two workers made it only 1.09× faster (the job already used ~1.4 of
the 2 cores: at most ~1.4×). There the fix is a cheaper batch first, and more workers only for
the cores left.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TORCH_MORE_WORKERS = (
    "Give the DataLoader more workers: `DataLoader(..., num_workers={suggested}, "
    "persistent_workers=True)` ({now} now{cores}). If more workers do not "
    "shorten the wait, each item costs too much: cache decoded samples, move heavy transforms "
    "out of `__getitem__` (batched, or on the GPU), and read from faster storage."
)
ALL_CORES = (
    "The {now} workers already match the {cores} cores the job may use: make each item "
    "cheaper: cache decoded samples, move heavy transforms out of `__getitem__` (batched, or "
    "on the GPU), read from faster storage, or pre-process the data once, offline."
)
PYDATASET_PROCESSES = (
    "Load in processes: `super().__init__(workers={workers}, use_multiprocessing=True, "
    "max_queue_size=10)` in your PyDataset (threads run its Python one at a time under the "
    "interpreter's lock), or pass a torch DataLoader with `num_workers={workers}, "
    "persistent_workers=True`."
)
PYDATASET_MORE = (
    "Give the PyDataset more workers: `super().__init__(workers={suggested}, "
    "use_multiprocessing=True)` ({now} now{cores}). If more workers do not shorten the wait, "
    "each batch costs too much: cache decoded samples, move heavy transforms out of "
    "`__getitem__`, read from faster storage."
)
TF_GENERATOR = (
    "A Python generator makes one batch at a time and cannot run in parallel: move its "
    "per-item work into `map(fn, num_parallel_calls=tf.data.AUTOTUNE)` over a dataset of "
    "indices or file names, or interleave several generators "
    "(`tf.data.Dataset.range(N).interleave(lambda i: tf.data.Dataset.from_generator(gen, "
    "args=(i,), output_signature=...), num_parallel_calls=tf.data.AUTOTUNE)`), then "
    "`.prefetch(tf.data.AUTOTUNE)`."
)
TF_ALREADY_PARALLEL = (
    "The pipeline already runs in parallel: make each batch cheaper. `cache()` what repeats "
    "(after decoding, before random augmentation), read files with `interleave(..., "
    "num_parallel_calls=tf.data.AUTOTUNE)`, give every `map` `num_parallel_calls`, batch "
    "before a cheap per-element map (vectorised), and pre-process the data once, offline, if "
    "all cores are busy."
)
TF_PYTHON = (
    " Its `tf.py_function`/`tf.numpy_function` runs one call at a time under the "
    "interpreter's lock, whatever `num_parallel_calls` says: write it in TensorFlow ops."
)


MIN_HOST_SAMPLES = 3
"""Host samples (every 0.5 s by default) a phase needs before its CPU use is trusted."""

WORTH_PARALLEL = 1 / (1 - 0.05)
"""Below this gain, parallel loading is not suggested: it would remove less than XProf's
moderate band (5 % of the step time waiting for input) from the phase."""

BUSY_CORES = (
    "The job's processes already keep {busy:.1f} of the {cores} cores it may use busy, so the "
    "same input work spread over more workers can make '{phase}' at most {ceiling:.2f}× "
    "faster ({speedup:.2f}× needs that work made cheaper). "
)
CHEAPER = (
    "Make each batch cheaper: cache decoded samples, move heavy transforms out of the per-item "
    "code (batched, or on the GPU), or pre-process the data once, offline."
)
TF_CHEAPER = (
    "Make each batch cheaper: `cache()` what repeats (after decoding, before random "
    "augmentation), batch before a cheap per-element map (vectorised), run augmentation on the "
    "GPU (Keras preprocessing layers inside the model), or pre-process the data once, offline."
)
THEN_PARALLEL = " Then, for the cores left: "


@dataclass(frozen=True)
class CoreBudget:
    """The cores a phase's job may use and how many its processes kept busy on average."""

    cores: int
    busy: float  # cores' worth of CPU time per second, the job's whole process tree

    @property
    def ceiling(self) -> float:
        """The most a fix that keeps the job's CPU work but spreads it over the cores can make
        the phase faster: its time cannot fall below that work over the cores."""
        return max(self.cores / self.busy, 1.0)


def core_budget(
    pipeline: Mapping[str, Any], job_cpu_pct: float | None, samples: int
) -> CoreBudget | None:
    """The phase's core budget, from the cores its pipeline's description gives and the job's
    mean CPU use over the phase (100 = one core); None where either is unknown or too thin."""
    cores = pipeline.get("cores")
    if not isinstance(cores, int) or cores < 1 or job_cpu_pct is None or job_cpu_pct <= 0:
        return None
    if samples < MIN_HOST_SAMPLES:
        return None
    return CoreBudget(cores=cores, busy=job_cpu_pct / 100)


CONTENDED = (
    "Its worker processes take the cores the step runs on: the thread that runs the steps "
    "waited for a core {share:.0%} of the time. "
)


def in_worker_processes(pipeline: Mapping[str, Any]) -> bool:
    """Whether the batches are made in processes of their own (DataLoader workers, a
    multiprocessing PyDataset): CPU the job uses beyond its stepping thread is theirs to give
    back, where a thread of the training process may be the step's own compute."""
    source = pipeline.get("source")
    if source == "DataLoader":
        workers = pipeline.get("workers")
        return isinstance(workers, int) and workers > 0
    return source == "PyDataset" and bool(pipeline.get("multiprocessing"))


def input_core_wait_s(
    pipeline: Mapping[str, Any],
    steady_s: float,
    core_wait_s: float,
    thread_run_s: float,
    job_cpu_pct: float,
    system_cpu_pct: float,
) -> float:
    """Of the time the stepping thread waited for a core over the steady steps (`core_wait_s`,
    hooks/core_waits.py), the part the input's worker processes caused: in proportion to the
    CPU the job used beyond that thread (`job_cpu_pct`, 100 = one core, less the thread's own
    run time) against all other use of the cores the job may use (the system's share of them,
    `system_cpu_pct`, counted over those cores). 0 where the cores are unknown or the batches
    are made in the training process."""
    cores = pipeline.get("cores")
    if not in_worker_processes(pipeline) or steady_s <= 0:
        return 0.0
    if not isinstance(cores, int) or cores < 1:
        return 0.0
    job = job_cpu_pct / 100
    others_in_job = max(job - thread_run_s / steady_s, 0.0)
    outside = max(system_cpu_pct / 100 * cores - job, 0.0)
    if others_in_job <= 0:
        return 0.0
    return core_wait_s * others_in_job / (others_in_job + outside)


def within_cores(
    pipeline: Mapping[str, Any], phase: str, budget: CoreBudget, speedup: float, fix: str
) -> str:
    """The fix where the cores limit parallel loading below `speedup` (the input made free):
    the limit, a cheaper batch first, and `fix` (more parallelism) only if still worth it."""
    text = BUSY_CORES.format(
        busy=budget.busy, cores=budget.cores, phase=phase, ceiling=budget.ceiling, speedup=speedup
    )
    text += TF_CHEAPER if pipeline.get("source") == "tf.data" else CHEAPER
    if budget.ceiling >= WORTH_PARALLEL:
        text += THEN_PARALLEL + fix
    return text


def advise(
    pipeline: Mapping[str, Any], fixes: Mapping[str, str], default: str
) -> tuple[str | None, str]:
    """(how the batches are made now, in a sentence, or None for a pipeline not understood;
    the fix for it). `fixes`: the frameworks' fixes for a pipeline with none of its parallelism
    yet (by "torch", "tensorflow", "keras-torch"), `default` for a pipeline not understood."""
    source = pipeline.get("source")
    if source == "DataLoader":
        workers = pipeline.get("workers")
        if workers == 0:
            made = "each batch is made in the training loop while the step waits (num_workers=0)"
            return made, fixes["torch"]
        if not isinstance(workers, int) or workers < 0:
            return None, default
        made = (
            f"the batches are made beside the steps by {_processes(workers, 'DataLoader ')}, "
            "yet the steps wait: the workers make them slower than the steps use them"
        )
        return made, _more_workers(TORCH_MORE_WORKERS, workers, pipeline.get("cores"))
    if source in ("generator", "iterator"):
        what = "Python generator" if source == "generator" else "iterator class"
        made = (
            f"the loop's own {what} (`{pipeline.get('name')}`) makes each batch in the training "
            "loop while the step waits"
        )
        return made, default
    if source == "PyDataset":
        if not _keras_parallel(pipeline):
            made = "the PyDataset makes each batch in the training loop while the step waits"
            return made, fixes["keras-torch"]
        workers = int(pipeline.get("workers") or 1)
        if not pipeline.get("multiprocessing"):
            made = (
                f"the PyDataset is loaded beside the steps by {workers} threads "
                "(use_multiprocessing=False: its Python runs one thread at a time), yet the "
                "steps wait"
            )
            return made, PYDATASET_PROCESSES.format(workers=workers)
        made = (
            f"the PyDataset is loaded beside the steps by {_processes(workers)}, yet the "
            "steps wait: the workers make batches slower than the steps use them"
        )
        return made, _more_workers(PYDATASET_MORE, workers, pipeline.get("cores"))
    if source == "tf.data":
        if pipeline.get("generator"):
            made = "a Python generator makes every batch, one at a time (from_generator)"
            return made, TF_GENERATOR
        python = TF_PYTHON if pipeline.get("python") else ""
        if pipeline.get("parallel"):
            made = (
                "the tf.data pipeline runs in parallel, yet the steps wait: it makes batches "
                "slower than the steps use them"
            )
            return made, TF_ALREADY_PARALLEL + python
        ahead = pipeline.get("prefetch") or pipeline.get("injected_prefetch")
        made = "the tf.data pipeline makes one batch at a time" + (
            ", ahead of the step only by its prefetch" if ahead else ", while the step waits"
        )
        return made, fixes["tensorflow"] + python
    return None, default


def _more_workers(template: str, workers: int, cores: Any) -> str:
    """Twice the workers, up to the cores the job may use; at the cores, cheaper items."""
    cores = cores if isinstance(cores, int) and cores > 0 else None
    if cores is not None and workers >= cores:
        return ALL_CORES.format(now=workers, cores=cores)
    suggested = min(2 * workers, cores) if cores else 2 * workers
    on_machine = f"; the job may use {cores} cores" if cores else ""
    return template.format(suggested=suggested, now=workers, cores=on_machine)


def _processes(count: object, kind: str = "") -> str:
    return f"{count} {kind}worker process{'' if count == 1 else 'es'}"


def _keras_parallel(pipeline: Mapping[str, Any]) -> bool:
    """Whether Keras loads this PyDataset beside the steps (its adapter's own rule)."""
    workers = pipeline.get("workers")
    if not isinstance(workers, int):
        return False
    return workers > 1 or (workers > 0 and bool(pipeline.get("multiprocessing")))
