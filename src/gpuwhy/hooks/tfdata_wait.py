"""Data wait where TensorFlow really waits: inside the compiled train function.

Keras on TensorFlow pulls each batch with `IteratorGetNext` *inside* its `tf.function`, between
the batch-begin and batch-end callbacks, so no Python hook sees the wait. While Keras's compiled
loop is traced under `call_stamping` (keras_functions), each pull it traces from a tf.data or
tf.distribute iterator is put between two `tf.timestamp` ops (docs/data-wait.md):

    request = timestamp()  ->  get_next  ->  delivery = timestamp()  ->  queue (request, delivery)

by control dependencies: the request stamp runs before the pull, the delivery stamp after every
tensor of the element exists, and the element's users after the record. The pair goes into a
process-wide `FIFOQueue` (atomic: the pulls of Keras's in-graph loop may overlap), which the
flusher thread drains (`poll`) and attribution matches to steps by time. The user's dataset,
its iterators and its elements are untouched: a pipeline of any kind (distributed, tf.data
service, placed on a device) is timed where its consumer stands, at a few small ops a pull,
and no iterator costs anything more to make. A loop Keras runs eagerly (`run_eagerly=True`)
pulls in Python: those pulls are timed on the host.
"""

from __future__ import annotations

import atexit
import functools
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from gpuwhy.hooks import emitter, patching

QUEUE_CAPACITY = 2**30
"""Pulls the queue may hold: never reached (it is drained every 0.2 s), never a block."""

_NO_ELEMENT = -1.0  # the delivery written for an Optional pull that found the data's end

T = TypeVar("T")


class _Local(threading.local):
    active = 0  # > 0 while a compiled function that should stamp its pulls is called
    inside = False  # inside a stamped pull: the iterators it calls are not stamped again
    made = 0  # pulls stamped on this thread (traced, or timed in a loop run eagerly)


_local = _Local()


class _Pulls:
    """The process's in-graph record of pulls, and its reader."""

    def __init__(self, tf: Any) -> None:
        with tf.init_scope(), tf.device("/CPU:0"):
            self.queue = tf.queue.FIFOQueue(
                QUEUE_CAPACITY, [tf.float64, tf.float64], shapes=[[], []], name="gpuwhy_pulls"
            )
        self.eager: deque[tuple[int, int]] = deque()  # pulls of a loop run eagerly

    def poll(self) -> list[tuple[int, int]]:
        """New pulls as monotonic-ns (request, delivery) pairs; called by the emitter, under
        its delivery lock (one reader at a time)."""
        pulls = []
        while self.eager:
            pulls.append(self.eager.popleft())
        count = int(self.queue.size())
        if count == 0:
            return pulls
        requests, deliveries = self.queue.dequeue_many(count)
        # tf.timestamp is wall-clock seconds; spans use the monotonic clock.
        offset_ns = time.time_ns() - time.monotonic_ns()
        for request_s, delivery_s in zip(requests.numpy(), deliveries.numpy(), strict=True):
            if delivery_s != _NO_ELEMENT:
                request = int(request_s * 1e9) - offset_ns
                pulls.append((request, request + int((delivery_s - request_s) * 1e9)))
        return pulls


_pulls: _Pulls | None = None


def _pulls_for(tf: Any) -> _Pulls:
    global _pulls
    if _pulls is None:
        _pulls = _Pulls(tf)
        emitter.add_poller(_pulls.poll)
        # Registered after TensorFlow's own exit handlers, so it runs before them.
        atexit.register(emitter.flush, 1.0)
    return _pulls


def install() -> bool:
    """Patch the pulls of tf.data and tf.distribute iterators (they stamp only inside
    `call_stamping`, and only while traced); True if the iterators are patched."""
    iterator_ops = sys.modules.get("tensorflow.python.data.ops.iterator_ops")
    input_lib = sys.modules.get("tensorflow.python.distribute.input_lib")
    owned = getattr(iterator_ops, "OwnedIterator", None)
    distributed = getattr(input_lib, "DistributedIterator", None)
    names = {owned: ("_next_internal", "get_next_as_optional")}
    if distributed is not None:
        names[distributed] = ("get_next", "get_next_as_optional")
    if owned is None or not all(hasattr(c, n) for c, pair in names.items() for n in pair):
        emitter.report_once("tf.data.stamps", "tf.data pulls not stamped: layout changed")
        return False
    for cls, (pull, optional) in names.items():
        local = cls is distributed  # its pull may agree with other workers: see across_workers
        patching.patch(cls, pull, functools.partial(_stamped, optional=False, local=local))
        patching.patch(cls, optional, functools.partial(_stamped, optional=True, local=local))
    return True


def installed() -> bool:
    iterator_ops = sys.modules.get("tensorflow.python.data.ops.iterator_ops")
    owned = getattr(iterator_ops, "OwnedIterator", None)
    return owned is not None and patching.is_patched(owned, "_next_internal")


def call_stamping(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)`; the pulls it traces on this thread are stamped."""
    local = _local
    local.active += 1
    try:
        return function(*args, **kwargs)
    finally:
        local.active -= 1


def made() -> int:
    """Pulls stamped on this thread so far (a compiled loop whose trace made none has none)."""
    return _local.made


def across_workers(iterator: Any) -> bool:
    """Whether a tf.distribute iterator is one of several workers' (MultiWorkerMirroredStrategy):
    its pull then also all-reduces, with every other worker, whether any data remains
    (input_lib's `_calculate_replicas_with_values`), and so waits for the slowest worker to
    reach its own pull: the other workers' compute and input, not this one's input."""
    try:
        return bool(iterator._strategy.extended._in_multi_worker_mode())
    except Exception:  # another layout: stamped whole, as a single worker's
        return False


def _stamped(
    original: Callable[..., Any], *, optional: bool, local: bool = False
) -> Callable[..., Any]:
    """A pull that stamps what it traces; `local`: one that stamps only its own worker's pulls
    (the tf.data iterators it calls) when it is one of several workers' (`across_workers`)."""

    @functools.wraps(original)
    def pull(self: Any, *args: Any, **kwargs: Any) -> Any:
        state = _local
        if not state.active or state.inside or (local and across_workers(self)):
            return original(self, *args, **kwargs)
        tf = sys.modules["tensorflow"]
        state.inside = True
        try:
            get = functools.partial(original, self, *args, **kwargs)
            if tf.executing_eagerly():  # `run_eagerly=True`: the pull runs here and now
                return _eager_pull(tf, get, optional)
            return _traced_pull(tf, get, optional)
        finally:
            state.inside = False

    return pull


def _eager_pull(tf: Any, get: Callable[[], Any], optional: bool) -> Any:
    pulls = _pulls_for(tf)
    requested = time.monotonic_ns()
    element = get()
    if not optional or bool(element.has_value()):
        pulls.eager.append((requested, time.monotonic_ns()))
    _local.made += 1
    return element


def _traced_pull(tf: Any, get: Callable[[], Any], optional: bool) -> Any:
    queue = _pulls_for(tf).queue
    with tf.device("/CPU:0"):
        requested = tf.timestamp()
    with tf.control_dependencies([requested]):
        element = get()
    parts = tf.nest.flatten(element, expand_composites=True)
    with tf.device("/CPU:0"), tf.control_dependencies(parts):
        delivered = tf.timestamp()
        if optional:  # an Optional that found the data's end is no batch
            delivered = tf.where(
                element.has_value(), delivered, tf.constant(_NO_ELEMENT, tf.float64)
            )
        written = queue.enqueue((requested, delivered))
    _local.made += 1
    # What uses the element waits for its record: the executor may otherwise run the step's
    # compute first (one inter-op thread runs ready ops in its own order), and the delivery
    # stamp would hold the compute as well.
    colocate = sys.modules["tensorflow.python.framework.ops"].colocate_with

    def after_record(tensor: Any) -> Any:
        with colocate(tensor), tf.control_dependencies([written]):
            return tf.identity(tensor)

    return tf.nest.map_structure(after_record, element, expand_composites=True)


# ------------------------------------------------------------- a custom loop's own worker's pulls


class _OwnPulls(threading.local):
    timing = False  # inside a distributed pull that `own_worker_wait` times
    ns = 0  # how long its worker's own pulls took


_own = _OwnPulls()


def install_worker_clock() -> bool:
    """Time the pulls a tf.distribute iterator makes of its own worker's data (input_lib's
    per-worker iterators), for `own_worker_wait`; True if they are patched."""
    input_lib = sys.modules.get("tensorflow.python.distribute.input_lib")
    worker = getattr(input_lib, "_SingleWorkerDatasetIteratorBase", None)
    names = ("get_next_as_list", "get_next_as_optional_list")
    if worker is None or not all(callable(getattr(worker, name, None)) for name in names):
        emitter.report_once("tf.distribute", "a worker's own pulls not timed: layout changed")
        return False
    for name in names:
        patching.patch(worker, name, _worker_pull)
    return True


def own_worker_wait(pull: Callable[[], T]) -> tuple[T, int]:
    """`pull()`, a custom loop's eager pull of a distributed iterator that is one of several
    workers' (`across_workers`), and how long (ns) its own worker's pulls inside it took: the
    wait for its own input, apart from the agreement with the other workers that follows."""
    own = _own
    own.timing, own.ns = True, 0
    try:
        item = pull()
    finally:
        own.timing = False
    return item, own.ns


def _worker_pull(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def pull(self: Any, *args: Any, **kwargs: Any) -> Any:
        own = _own
        if not own.timing:
            return original(self, *args, **kwargs)
        start = time.monotonic_ns()
        try:
            return original(self, *args, **kwargs)
        finally:
            own.ns += time.monotonic_ns() - start

    return pull
