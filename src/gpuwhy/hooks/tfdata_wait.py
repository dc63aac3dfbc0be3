"""Data wait where TensorFlow really waits: inside the compiled train function.

Keras on TensorFlow pulls each batch with `IteratorGetNext` *inside* its `tf.function`, between
the batch-begin and batch-end callbacks, so no Python hook sees the wait. While Keras's compiled
loop is traced under `call_stamping` (keras_functions), each pull it traces from a tf.data or
tf.distribute iterator is put between two `tf.timestamp` ops (docs/data-wait.md):

    request = timestamp()  ->  get_next  ->  delivery = timestamp()  ->  stage (request, delivery)

by control dependencies: the request stamp runs before the pull, the delivery stamp after every
tensor of the element exists, and the element's users after the record. The pair goes into a
process-wide staging area on the CPU (`Stage`: atomic, for the pulls of Keras's in-graph loop
may overlap; synchronous, where a `FIFOQueue`'s asynchronous enqueue cost a step ~25 µs more),
which the flusher thread drains (`poll`) and attribution matches to steps by time. The user's
dataset, its iterators and its elements are untouched: a pipeline of any kind (distributed,
tf.data service, placed on a device) is timed where its consumer stands, at a few small ops a
pull, and no iterator costs anything more to make. A loop Keras runs eagerly (`run_eagerly=True`)
pulls in Python: those pulls are timed on the host.

With several steps per execution, a later pull overlaps the previous step's compute, so its wait
starts when that compute ends. Keras 3's step, traced under the same call, stamps that moment
(`timing_steps`): one `tf.timestamp` after the step's outputs and the optimizer's update, staged
in the same area as a pull whose delivery reads `_COMPUTE_END`.
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
from gpuwhy.hooks.attribution import COMPUTE_END

STAGING_AREA = "gpuwhy_pulls"
"""The shared name of the process's staging area of pulls (on the CPU; no capacity or memory
limit: drained every 0.2 s, it never blocks a pull)."""

DRAIN_BLOCK = 16
"""Pulls taken out of the staging area per iteration of the drain's loop."""

DRAIN_CALL_FROM = 32
"""Pulls from which a call of the compiled drain takes the blocks, not eager takes one by one:
on a 2-core machine (2026-11-29) an eager take cost ~12 µs, and a call of any compiled function
~180 µs of CPU (~240 µs wall) before it takes anything."""

_NO_ELEMENT = -1.0  # the delivery written for an Optional pull that found the data's end
_COMPUTE_END = -2.0  # the delivery written beside a step's compute end (no pull)
_AREA = {"capacity": 0, "memory_limit": 0, "container": "", "shared_name": STAGING_AREA}

T = TypeVar("T")


class _Local(threading.local):
    active = 0  # > 0 while a compiled function that should stamp its pulls is called
    inside = False  # inside a stamped pull: the iterators it calls are not stamped again
    made = 0  # pulls stamped on this thread (traced, or timed in a loop run eagerly)


_local = _Local()


class _Pulls:
    """The process's in-graph record of pulls, and its reader."""

    def __init__(self, tf: Any, area: dict[str, Any] | None = None) -> None:
        self.tf = tf
        self.area = _AREA if area is None else area  # the staging area's attributes
        self.pair = [tf.float64, tf.float64]  # (request, delivery) seconds
        self.eager: deque[tuple[int, int]] = deque()  # pulls of a loop run eagerly
        self._drain: Any = None  # a tf.function

    def stage(self, requested: Any, delivered: Any) -> Any:
        """The op that records one pull (traced on the CPU, as its reader runs)."""
        return self.tf.raw_ops.Stage(values=[requested, delivered], **self.area)

    def poll(self) -> list[tuple[int, int]]:
        """New pulls as monotonic-ns (request, delivery) pairs; called by the emitter, under
        its delivery lock (one reader at a time: the area is taken from as often as it holds
        pulls, so no take waits)."""
        pulls = []
        while self.eager:
            pulls.append(self.eager.popleft())
        tf = self.tf
        with tf.device("/CPU:0"):
            count = int(tf.raw_ops.StageSize(dtypes=self.pair, **self.area))
            if count == 0:
                return pulls
            seconds: list[tuple[float, float]] = []
            blocks = count // DRAIN_BLOCK if count >= DRAIN_CALL_FROM else 0
            if blocks:
                requests, deliveries = self._drainer()(tf.constant(blocks, tf.int32))
                seconds.extend(
                    zip(requests.numpy().tolist(), deliveries.numpy().tolist(), strict=True)
                )
            for _ in range(count - blocks * DRAIN_BLOCK):  # one by one
                request_s, delivery_s = tf.raw_ops.Unstage(dtypes=self.pair, **self.area)
                seconds.append((float(request_s), float(delivery_s)))
        # tf.timestamp is wall-clock seconds; spans use the monotonic clock.
        offset_ns = time.time_ns() - time.monotonic_ns()
        for request_s, delivery_s in seconds:
            request = int(request_s * 1e9) - offset_ns
            if delivery_s == _COMPUTE_END:
                pulls.append((request, COMPUTE_END))
            elif delivery_s != _NO_ELEMENT:
                pulls.append((request, request + int((delivery_s - request_s) * 1e9)))
        return pulls

    def prepare(self) -> None:
        """Trace the drain now, while a compiled loop that stamps is traced (a warm-up step
        already), not at its first use: tracing holds the interpreter ~0.02 s, and on the
        flusher thread it stalled the job's steps while their input ran on (a two-worker job's
        next steps read 0-20 ms of wait where 31 ms was true). Its first run (~0.06 s of
        graph set-up) is left to the flusher: TensorFlow runs it without the interpreter."""
        if self._drain is None:
            tf = self.tf
            try:
                with tf.init_scope():
                    self._drainer().get_concrete_function()
            except Exception as error:  # never into the trace: the first drain builds it
                self._drain = None
                emitter.report_once("tf.data.drain", f"pull record drain not ready: {error!r}")

    def _drainer(self) -> Any:
        """A compiled function that takes `blocks` times `DRAIN_BLOCK` pulls out of the area in
        one call (the area has no batch read; an eager take costs ~15 µs a pull, the loop's
        ~1-2 µs: an iteration costs more than a pull taken, so it takes a block)."""
        if self._drain is None:
            tf, pair, area = self.tf, self.pair, self.area

            def take(i: Any, requests: Any, deliveries: Any) -> tuple[Any, Any, Any]:
                pulls = [tf.raw_ops.Unstage(dtypes=pair, **area) for _ in range(DRAIN_BLOCK)]
                return (
                    i + 1,
                    requests.write(i, tf.stack([request for request, _ in pulls])),
                    deliveries.write(i, tf.stack([delivery for _, delivery in pulls])),
                )

            def drain(blocks: Any) -> tuple[Any, Any]:
                with tf.device("/CPU:0"):
                    shape = [DRAIN_BLOCK]
                    empty = [tf.TensorArray(tf.float64, size=blocks, element_shape=shape)] * 2
                    _, requests, deliveries = tf.while_loop(
                        lambda i, *_: i < blocks, take, [tf.constant(0), *empty]
                    )
                    return tf.reshape(requests.stack(), [-1]), tf.reshape(deliveries.stack(), [-1])

            spec = [tf.TensorSpec([], tf.int32)]
            self._drain = tf.function(drain, input_signature=spec, autograph=False)
        return self._drain


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
    pulls = _pulls_for(tf)
    pulls.prepare()
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
        written = pulls.stage(requested, delivered)
    _local.made += 1
    # What uses the element waits for its record: the executor may otherwise run the step's
    # compute first (one inter-op thread runs ready ops in its own order), and the delivery
    # stamp would hold the compute as well.
    colocate = sys.modules["tensorflow.python.framework.ops"].colocate_with

    def after_record(tensor: Any) -> Any:
        with colocate(tensor), tf.control_dependencies([written]):
            return tf.identity(tensor)

    return tf.nest.map_structure(after_record, element, expand_composites=True)


def timing_steps(original: Callable[..., Any]) -> Callable[..., Any]:
    """Patch of Keras 3's `TensorFlowTrainer._make_function(step_function)`: the step it
    compiles stamps its compute's end where `steps_are_timed` (`_timed_step`)."""

    @functools.wraps(original)
    def make(self: Any, step_function: Callable[..., Any]) -> Any:
        return original(self, _timed_step(self, step_function))

    return make


def steps_are_timed(model: Any) -> bool:
    """Whether the model's steps stamp their compute's end when traced under `call_stamping`:
    only where later pulls overlap a compute (several steps per execution), on one replica
    (each replica would stamp its own), and outside XLA (which compiles no staging op)."""
    try:
        return (
            int(model.steps_per_execution) > 1
            and model.jit_compile is False
            and model.distribute_strategy.num_replicas_in_sync == 1
        )
    except Exception:  # a layout that changed: the execution's tail stands in (attribution)
        return False


def _timed_step(model: Any, step_function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(step_function)
    def step(data: Any) -> Any:
        outputs = step_function(data)
        if not _local.active:
            return outputs
        tf = sys.modules["tensorflow"]
        if tf.executing_eagerly() or not steps_are_timed(model):
            return outputs
        try:
            return _stamp_end(tf, model, outputs)
        except Exception as error:  # never into the user's step: it runs unstamped
            emitter.report_once("tf.step.stamp", f"step compute not stamped: {error!r}")
            return outputs

    return step


def _stamp_end(tf: Any, model: Any, outputs: Any) -> Any:
    """`outputs` made to wait for a stamp taken once they exist and the optimizer's update is
    done (its iteration count read: ordered after the update by the function's automatic
    control dependencies)."""
    tensors = [v for v in tf.nest.flatten(outputs, expand_composites=True) if tf.is_tensor(v)]
    iterations = getattr(getattr(model, "optimizer", None), "iterations", None)
    if iterations is not None:
        tensors.append(tf.convert_to_tensor(iterations))
    with tf.device("/CPU:0"), tf.control_dependencies(tensors):
        ended = tf.timestamp()
        written = _pulls_for(tf).stage(ended, tf.constant(_COMPUTE_END, tf.float64))
    with tf.control_dependencies([written]):
        return tf.nest.map_structure(lambda v: tf.identity(v) if tf.is_tensor(v) else v, outputs)


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
