"""How the loop's input is made: described once per pipeline, for INPUT_BOUND to say whether the
batches are made in the loop, while the step waits, or beside it, and to fit its fix to that.

A steady wait has different causes and fixes: a `DataLoader(num_workers=0)` makes each batch in
the training loop itself (the fix: worker processes); one whose workers still keep the steps
waiting makes batches slower than the steps use them (more workers, cheaper items); a tf.data map
without `num_parallel_calls` makes one batch at a time, ahead of the step only by tf.data's
prefetch; a Python generator or `py_function` in a pipeline runs under the interpreter's lock.

When an iterator is made (each epoch's `iter(loader)`, `iter(dataset)`, Keras's epoch over a
PyDataset; a plain loop's own generator or iterator class once found), its pipeline is described
and sent as one `Event(kind=INPUT_EVENT)`, once per loader or dataset and description in this
process: a few per run. Its time, the iterator's start, places it in the phase whose loop follows
(analysis/inputs.py). Never raises: a pipeline it cannot read is not described.
"""

from __future__ import annotations

import inspect
import weakref
from types import CodeType
from typing import Any

from gpuwhy.cores import usable_cores
from gpuwhy.hooks import emitter
from gpuwhy.model import Event
from gpuwhy.wire import INPUT_EVENT

# Operations that run Python: `tf.numpy_function` (PyFunc), `tf.py_function` (EagerPyFunc), and
# the generator of `Dataset.from_generator` (a PyFunc inside its flat_map).
_PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
_FUNCTION_ATTRS = ("_map_func", "_func")  # map, flat_map, interleave, filter: their function
_KERAS_MODULES = ("keras.", "tf_keras.")
_MOST_DATASETS = 200  # a pipeline walked no further (a deep chain of zips)

# What was described, by loader or dataset (weakly), so each is sent once; ids where an object
# takes no weak reference.
_sent: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_sent_ids: dict[int, dict[str, Any]] = {}


def loader_made(loader: Any, t_ns: int) -> None:
    """A torch DataLoader `loader` made an iterator at `t_ns`: send its settings once. Not one
    Keras builds around the job's own data (a PyDataset, arrays, on the torch backend): that
    data is what the job controls, and is described where Keras reads it."""
    try:
        module = type(getattr(loader, "dataset", None)).__module__ or ""
        if module.startswith(_KERAS_MODULES):
            return
        workers = int(getattr(loader, "num_workers", 0) or 0)
        description = {
            "source": "DataLoader",
            "workers": workers,
            "prefetch_factor": getattr(loader, "prefetch_factor", None) if workers else None,
            "persistent_workers": bool(getattr(loader, "persistent_workers", False)),
            "pin_memory": bool(getattr(loader, "pin_memory", False)),
            # torch's _DatasetKind: 0 a map-style dataset, 1 an IterableDataset
            "iterable": getattr(loader, "_dataset_kind", 0) == 1,
        }
    except Exception as error:  # a layout that changed: nothing described
        emitter.report_once("input.loader", f"DataLoader not described: {error!r}")
        return
    _send(loader, description, t_ns)


def py_dataset_made(dataset: Any, t_ns: int) -> None:
    """Keras began an epoch over the PyDataset `dataset` at `t_ns`: send its settings once.
    Keras loads it in the loop unless `workers > 1` or `use_multiprocessing` with a worker
    (then threads, or processes)."""
    try:
        description = {
            "source": "PyDataset",
            "workers": int(dataset.workers),
            "multiprocessing": bool(dataset.use_multiprocessing),
            "max_queue_size": int(dataset.max_queue_size),
        }
    except Exception as error:
        emitter.report_once("input.pydataset", f"PyDataset not described: {error!r}")
        return
    _send(dataset, description, t_ns)


def loop_reads(code: CodeType, t_ns: int) -> None:
    """A plain loop's input was found at `t_ns` (generator_pulls.py): its own generator or
    iterator class, run in the training loop as the step waits. Sent once per `code`."""
    generator = bool(code.co_flags & inspect.CO_GENERATOR)
    description = {
        "source": "generator" if generator else "iterator",
        "name": getattr(code, "co_qualname", code.co_name),
    }
    _send(code, description, t_ns)


def dataset_made(dataset: Any, t_ns: int) -> None:
    """A tf.data iterator over `dataset` was made at `t_ns`: send its pipeline once."""
    if dataset is None or _was_sent(dataset):  # a dataset does not change: described once
        return
    try:
        description = describe_dataset(dataset)
    except Exception as error:
        emitter.report_once("input.dataset", f"tf.data pipeline not described: {error!r}")
        return
    if description is not None:
        _send(dataset, description, t_ns)


def describe_dataset(dataset: Any) -> dict[str, Any] | None:
    """What a tf.data pipeline does: parallel stages, prefetch, cache, Python, a generator.
    None for the per-device buffers tf.distribute reads a pipeline through, whose source is out
    of their sight (it is described as each worker's iterator is made: framework_hooks)."""
    kinds: set[str] = set()
    python = generator = False
    pending, walked = [dataset], 0
    while pending and walked < _MOST_DATASETS:
        node = pending.pop()
        walked += 1
        kinds.add(type(node).__name__.lstrip("_"))
        for attr in _FUNCTION_ATTRS:
            ops = _function_ops(getattr(node, attr, None))
            python = python or bool(ops & _PYTHON_OPS)
            generator = generator or "GeneratorDataset" in ops
        pending.extend(node._inputs())
    if any("PerDeviceGenerator" in kind for kind in kinds):
        return None  # a tf.distribute device buffer: its source is described where it is made
    options = dataset.options().experimental_optimization
    return {
        "source": "tf.data",
        "parallel": any(kind.startswith("Parallel") for kind in kinds),
        "prefetch": "PrefetchDataset" in kinds,
        # tf.data adds a prefetch after a last synchronous stage unless told not to
        "injected_prefetch": options.inject_prefetch is not False,
        "cache": "CacheDataset" in kinds,
        "python": python,
        "generator": generator,
        "stages": sorted(kinds),
    }


def _function_ops(wrapper: Any) -> set[str]:
    """The operation types of a tf.data stage's function, its nested functions' included."""
    graph = getattr(getattr(wrapper, "function", None), "graph", None)
    if graph is None:
        return set()
    definition = graph.as_graph_def()
    ops = {node.op for node in definition.node}
    for function in definition.library.function:
        ops.update(node.op for node in function.node_def)
    return ops


def _was_sent(key: Any) -> bool:
    try:
        return key in _sent
    except TypeError:
        return id(key) in _sent_ids


def _send(key: Any, description: dict[str, Any], t_ns: int) -> None:
    description = {**description, "cores": usable_cores()}  # every pipeline's, for its advice
    try:
        if _sent.get(key) == description:
            return
        _sent[key] = description
    except TypeError:  # takes no weak reference
        if _sent_ids.get(id(key)) == description:
            return
        _sent_ids[id(key)] = description
    emitter.emit(Event(t_ns, INPUT_EVENT, "the loop's input pipeline", dict(description)))


def forget() -> None:
    """Describe every pipeline again (the hooks were undone and installed afresh)."""
    _sent.clear()
    _sent_ids.clear()
