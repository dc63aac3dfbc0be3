"""INPUT_BOUND's words for the pipeline the job has: how its batches are made now, and the fix
that changes that (the description comes from the hooks: analysis/inputs.py).

Made in the loop (`DataLoader(num_workers=0)`): the step waits for every batch's whole making,
and loading beside the step removes all of the wait. Made beside the steps (workers, a parallel
tf.data map) and the steps still wait: the pipeline makes batches slower than the steps use them,
and only the wait left exposed is removable; the fix is more of the parallelism the job already
has, or less work per batch, not parallelism it has already. Python in the pipeline (a generator,
`py_function`) runs one call at a time under the interpreter's lock, beside the loop's own Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TORCH_MORE_WORKERS = (
    "Give the DataLoader more workers: `DataLoader(..., num_workers={suggested}, "
    "persistent_workers=True)` ({now} now{cores}). If more workers do not "
    "shorten the wait, each item costs too much: cache decoded samples, move heavy transforms "
    "out of `__getitem__` (batched, or on the GPU), and read from faster storage."
)
TORCH_ALL_CORES = (
    "The {now} workers already match the {cores} cores the job may use: make each item "
    "cheaper: cache decoded samples, move heavy transforms out of `__getitem__` (batched, or "
    "on the GPU), read from faster storage, or pre-process the data once, offline."
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


def made(pipeline: Mapping[str, Any]) -> str | None:
    """How the batches are made now, in a sentence; None for a pipeline not understood."""
    source = pipeline.get("source")
    if source == "DataLoader":
        workers = pipeline.get("workers")
        if workers == 0:
            return "each batch is made in the training loop while the step waits (num_workers=0)"
        if isinstance(workers, int) and workers > 0:
            return (
                f"{workers} DataLoader worker processes make the batches beside the steps, "
                "yet the steps wait: the workers make them slower than the steps use them"
            )
    if source == "tf.data":
        if pipeline.get("generator"):
            return "a Python generator makes every batch, one at a time (from_generator)"
        if pipeline.get("parallel"):
            return (
                "the tf.data pipeline runs in parallel, yet the steps wait: it makes batches "
                "slower than the steps use them"
            )
        ahead = pipeline.get("prefetch") or pipeline.get("injected_prefetch")
        return "the tf.data pipeline makes one batch at a time" + (
            ", ahead of the step only by its prefetch" if ahead else ", while the step waits"
        )
    return None


def fix(pipeline: Mapping[str, Any], fixes: Mapping[str, str], default: str) -> str:
    """The fix for this pipeline; `fixes`: the frameworks' fixes for a pipeline with none of
    its parallelism yet (by "torch", "tensorflow"), `default` for a pipeline not understood."""
    source = pipeline.get("source")
    if source == "DataLoader":
        workers = pipeline.get("workers")
        if workers == 0:
            return fixes["torch"]
        if not isinstance(workers, int) or workers < 0:
            return default
        cores = pipeline.get("cores") if isinstance(pipeline.get("cores"), int) else None
        if cores is not None and workers >= cores:
            return TORCH_ALL_CORES.format(now=workers, cores=cores)
        suggested = min(2 * workers, cores) if cores else 2 * workers
        on_machine = f"; the job may use {cores} cores" if cores else ""
        return TORCH_MORE_WORKERS.format(suggested=suggested, now=workers, cores=on_machine)
    if source == "tf.data":
        if pipeline.get("generator"):
            return TF_GENERATOR
        python = TF_PYTHON if pipeline.get("python") else ""
        if pipeline.get("parallel"):
            return TF_ALREADY_PARALLEL + python
        return fixes["tensorflow"] + python
    return default
