"""Post-import patches for TensorFlow's tf.data iteration and PyTorch's DataLoader and optimizer.

Each `install_*` runs once, right after the framework's own import finished, and patches only
Python entry points (no framework state is created or initialised). Keras lives in
`keras_hooks.py`; the counting of device-to-host syncs in `sync_counting.py`.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

from gpuwhy.hooks import (
    emitter,
    input_pipelines,
    iterators,
    patching,
    profile_window,
    sync_counting,
    tracker,
    worker_handover,
)

_window: profile_window.TorchWindow | None = None  # `gpuwhy run --profile`: set by install_torch


def install_tensorflow() -> None:
    """Time Python iteration over tf.data datasets (`for batch in dataset`, `next(iterator)`);
    count host reads of device tensors."""
    from gpuwhy.hooks import tf_traces, tfdata_wait  # TensorFlow's only: not in a torch job

    sync_counting.install_tensorflow()
    tf_traces.install()
    iterator_ops = sys.modules.get("tensorflow.python.data.ops.iterator_ops")
    context = sys.modules.get("tensorflow.python.eager.context")
    if iterator_ops is None or context is None:
        emitter.report_once("tf.data", "tf.data iteration not hooked: module layout changed")
        return
    executing_eagerly = context.executing_eagerly

    def make(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
        @functools.wraps(original)
        def __next__(self: Any) -> Any:
            if not executing_eagerly():  # traced inside a tf.function: not a real pull
                return original(self)
            return iterators.timed_next(original, self)

        return __next__

    patching.patch(iterator_ops.OwnedIterator, "__next__", make)
    patching.patch(iterator_ops.OwnedIterator, "__init__", _stamping(_dataset_made))
    owned = iterator_ops.OwnedIterator
    tracker.released_by_loop.add(owned)
    patching.on_undo(lambda: tracker.released_by_loop.discard(owned))
    # tf.distribute custom loops iterate `strategy.experimental_distribute_dataset(ds)`: its
    # iterator pulls each replica's batch through get_next(), not OwnedIterator.__next__.
    input_lib = sys.modules.get("tensorflow.python.distribute.input_lib")
    # Each worker's iterator reads the (sharded) pipeline through per-device buffers, whose
    # own iterators cannot see it: it is described as that iterator is made.
    worker_iterator = getattr(input_lib, "_SingleWorkerOwnedDatasetIterator", None)
    if worker_iterator is not None and "__init__" in vars(worker_iterator):
        patching.patch(worker_iterator, "__init__", _stamping(_dataset_made, stamp=False))
    distributed = getattr(input_lib, "DistributedIterator", None)
    if distributed is None or not hasattr(distributed, "__next__"):
        return
    if not tfdata_wait.install_worker_clock():
        patching.patch(distributed, "__next__", make)
        return

    def make_distributed(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
        @functools.wraps(original)
        def __next__(self: Any) -> Any:
            if not executing_eagerly():
                return original(self)
            # One of several workers: its wait is its own worker's pulls, not the agreement
            # with the others on whether data remains, which waits for the slowest worker.
            waited = tfdata_wait.own_worker_wait if tfdata_wait.across_workers(self) else None
            return iterators.timed_next(original, self, waited=waited)

        return __next__

    patching.patch(distributed, "__next__", make_distributed)


def install_torch() -> None:
    """Time DataLoader pulls; mark optimizer steps as step boundaries (no device sync); count
    the job's own device-to-host syncs."""
    sync_counting.install_torch()
    dataloader = sys.modules.get("torch.utils.data.dataloader")
    base = getattr(dataloader, "_BaseDataLoaderIter", None)
    if base is None:
        emitter.report_once("torch", "DataLoader not hooked: module layout changed")
    else:

        def make(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
            @functools.wraps(original)
            def __next__(self: Any) -> Any:
                # Only loaders with workers have made batches to hand over.
                if not getattr(self, "_num_workers", 0):
                    return iterators.timed_next(original, self)
                return iterators.timed_next(
                    original,
                    self,
                    ready=worker_handover.batch_ready,
                    handed_over=worker_handover.handover_wait,
                )

            return __next__

        patching.patch(base, "__next__", make)
        patching.patch(base, "__init__", _stamping(_loader_made))
        workers = getattr(dataloader, "_MultiProcessingDataLoaderIter", None)
        if workers is not None and "__del__" in vars(workers):
            patching.patch(workers, "__del__", _timed_teardown)
        if workers is not None:
            worker_handover.install(workers)
        # A DataLoader loop shows torch training (backward passes, optimizer steps) to the hooks.
        tracker.shows_training = lambda source: isinstance(source, (base, iterators.LoaderIterator))
        patching.on_undo(lambda: setattr(tracker, "shows_training", None))
    autograd = sys.modules.get("torch.autograd")
    if autograd is not None and callable(getattr(autograd, "backward", None)):
        patching.patch(autograd, "backward", _noting_training)
    optimizer = sys.modules.get("torch.optim.optimizer")
    register = getattr(optimizer, "register_optimizer_step_post_hook", None)
    if register is None or patching.is_patched(optimizer, "gpuwhy_step_hook"):
        return
    global _window
    _window = profile_window.from_environment()
    if _window is not None:
        emitter.on_exit(_window.close)
    handle = register(_after_optimizer_step)
    patching.patch(optimizer, "gpuwhy_step_hook", lambda _: handle)  # marks it installed
    patching.on_undo(handle.remove)
    module = getattr(sys.modules.get("torch.nn.modules.module"), "Module", None)
    if module is not None and callable(getattr(module, "train", None)):
        patching.patch(module, "train", _noting_mode)


def install_accelerate(data_loader: Any) -> None:
    """Time the loop's pulls from Accelerate's prepared DataLoaders (`accelerate.data_loader`):
    they pull one batch ahead of the loop, so the base DataLoader's pulls would end the loop's
    phase before its last batch trains."""
    found = False
    for name in ("DataLoaderShard", "DataLoaderDispatcher"):
        wrapper = getattr(data_loader, name, None)
        if wrapper is not None and "__iter__" in vars(wrapper):
            patching.patch(wrapper, "__iter__", _loader_iter)
            found = True
    if not found:
        emitter.report_once("accelerate", "Accelerate's DataLoaders not hooked: layout changed")


def _loader_iter(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    @functools.wraps(original)
    def __iter__(self: Any) -> Any:
        created = tracker.clock()
        inner = original(self)
        try:
            return iterators.LoaderIterator(inner, created)
        except Exception as error:  # the loop runs untimed rather than not at all
            emitter.report_once("accelerate", f"Accelerate loop not timed: {error!r}")
            return inner

    return __iter__


def _stamping(
    described: Callable[[Any, tuple[Any, ...], dict[str, Any], int], None],
    *,
    stamp: bool = True,
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """An iterator's `__init__` that notes when it began (building a pipeline, starting
    workers): a plain loop over it begins then, not at its first pull (tracker._loop_start).
    `described(iterator, args, kwargs, started)` then tells how its input is made. `stamp`
    False: only that, for an object no loop iterates itself (a tf.distribute worker's)."""

    def make(original: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(original)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            started = tracker.clock()
            if stamp:  # a loop whose iterator lives on ended already
                with contextlib.suppress(Exception):
                    tracker.state()
            original(self, *args, **kwargs)
            if stamp:  # an object that takes no new attribute: its loop starts at its first pull
                with contextlib.suppress(Exception):
                    setattr(self, tracker.CREATED_ATTR, started)
            with contextlib.suppress(Exception):  # never into the job's `iter()`
                described(self, args, kwargs, started)

        return __init__

    return make


def _loader_made(iterator: Any, args: tuple[Any, ...], kwargs: dict[str, Any], t: int) -> None:
    """`_BaseDataLoaderIter(loader)`: the DataLoader's settings."""
    loader = args[0] if args else kwargs.get("loader")
    if loader is not None:
        input_pipelines.loader_made(loader, t)


def _dataset_made(iterator: Any, args: tuple[Any, ...], kwargs: dict[str, Any], t: int) -> None:
    """`OwnedIterator(dataset)`: the tf.data pipeline (none where rebuilt from its parts)."""
    input_pipelines.dataset_made(args[0] if args else kwargs.get("dataset"), t)


def _timed_teardown(original: Callable[[Any], None]) -> Callable[[Any], None]:
    """A DataLoader iterator's `__del__` (joining its workers: as long as a batch takes to
    make) timed for the tracker: a loop left early spent that time waiting for its input."""

    @functools.wraps(original)
    def __del__(self: Any) -> None:
        # Plain try blocks, no helper: at interpreter exit this module's globals may be gone,
        # and the workers must be shut down whatever the timing does.
        try:
            start = tracker.clock()
        except Exception:
            start = None
        original(self)
        if start is None:
            return
        try:
            tracker.owner_destroyed(self, start, tracker.clock())
        except Exception:  # a destructor must never raise
            return

    return __del__


def _noting_training(original: Callable[..., Any]) -> Callable[..., Any]:
    """`torch.autograd.backward` (what `Tensor.backward` calls) that first tells the tracker
    the thread trains."""

    @functools.wraps(original)
    def backward(*args: Any, **kwargs: Any) -> Any:
        if tracker.awaiting_training:  # else nothing to tell: one attribute read a step
            try:
                tracker.trained()
            except Exception as error:  # never into the user's training
                emitter.report_once("backward", f"backward hook failed: {error!r}")
        return original(*args, **kwargs)

    return backward


# The first parameter of each optimizer's first group: a module whose first parameter is one of
# them is a model being trained, the one whose `.eval()`/`.train()` marks a validation. Weakly
# held and compared by identity: a freed model's id may come back as another module's.
_optimized: dict[int, weakref.ref[Any]] = {}
# Optimizers seen, by id, weakly held: a `WeakSet` would make a weak reference at every lookup.
_seen_optimizers: dict[int, weakref.ref[Any]] = {}
_mode_depth = threading.local()


def _noting_mode(original: Callable[..., Any]) -> Callable[..., Any]:
    """`Module.train(mode)` (what `.eval()` calls too) that tells the tracker when the trained
    model switches mode. Only the outermost call is looked at: `train()` recurses into every
    submodule, and Trainer-style loops call it on every step."""

    @functools.wraps(original)
    def train(self: Any, mode: bool = True) -> Any:
        depth = getattr(_mode_depth, "value", 0)
        _mode_depth.value = depth + 1
        try:
            return original(self, mode)
        finally:
            _mode_depth.value = depth
            if depth == 0 and _optimized:
                try:
                    first = next(self.parameters(), None)
                    held = _optimized.get(id(first)) if first is not None else None
                    if held is not None and held() is first:
                        tracker.model_mode(bool(mode), tracker.clock())
                        _time_forwards(self, not mode)
                except Exception as error:  # never into the user's training
                    emitter.report_once("module.train", f"mode hook failed: {error!r}")

    return train


_forward_hook: Any = None  # the handle of the hook on the trained model while in eval mode


def _time_forwards(model: Any, evaluating: bool) -> None:
    """While the trained model is in eval mode, a forward hook on it (on that one module, for
    the evaluation's span only) tells the tracker when each forward returned: the last one is
    where an evaluation that the job's exit ends, ended."""
    global _forward_hook
    if _forward_hook is not None:
        _forward_hook.remove()
        _forward_hook = None
    if evaluating:
        _forward_hook = model.register_forward_hook(_forwarded)


def _forwarded(module: Any, args: Any, output: Any) -> None:
    try:
        tracker.evaluated(tracker.clock())
    except Exception as error:  # never into the user's evaluation
        emitter.report_once("module.forward", f"forward hook failed: {error!r}")


def _after_optimizer_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    try:
        seen = _seen_optimizers.get(id(optimizer))
        if seen is None or seen() is not optimizer:
            _seen_optimizers[id(optimizer)] = weakref.ref(optimizer)
            groups = optimizer.param_groups
            if groups and groups[0]["params"]:
                first = groups[0]["params"][0]
                _optimized[id(first)] = weakref.ref(first)
        tracker.optimizer_step(tracker.clock())
        if _window is not None:
            _window.on_step()
    except Exception as error:
        emitter.report_once("optimizer", f"optimizer step hook failed: {error!r}")
