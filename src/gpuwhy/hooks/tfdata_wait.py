"""Data wait where TensorFlow really waits: inside the compiled train function.

Keras on TensorFlow pulls each batch with `IteratorGetNext` *inside* its `tf.function`, between
the batch-begin and batch-end callbacks, so no Python hook sees the wait. This module adds two
synchronous stages on top of the dataset Keras iterates (docs/data-wait.md):

    zip(stamps, dataset).map(record)       stamps = range(∞).map(tf.timestamp)

`zip` asks its inputs for their next element in order, so the stamp is taken when the consumer
*requests* an element; `record` runs when the element is *delivered* and writes (request,
delivery − request) into a host ring buffer (a CPU `tf.Variable`). Both stages are synchronous
and the wrapper turns tf.data's `inject_prefetch` off (adding the very `prefetch(AUTOTUNE)` that
rewrite would have added beneath the stages), so a stamp is the consumer's moment, never a
prefetch thread's. Elements, their order and the pipeline the user built are unchanged; the
stages run on the consumer's thread (`_inline_map`) and cost ~20 µs of CPU per batch, plus
~6-10 ms per iterator (Keras pulls from one per epoch and phase; keras_patches leaves the one
it makes for nothing plain) to instantiate their two functions; no device sync. The flusher
thread reads the ring (`poll`) and attributes pulls to steps by time (`attribution.py`).

Where the wrapper cannot apply (a distributed dataset, tf.data service, elements placed on a
device), nothing is changed and the phase's data wait is reported as unknown.
"""

from __future__ import annotations

import atexit
import contextlib
import sys
import threading
import time
import weakref
from typing import Any

from gpuwhy.hooks import emitter

RING_SIZE = 4096
"""Pulls held between two polls (one poll per 0.2 s: enough for 20 000 steps per second)."""

_UNWRAPPABLE = ("DataService", "ToDevice", "MultiDevice", "Distributed")
_PASS_THROUGH = (
    "_OptionsDataset",
    "_AssertNextDataset",
    "_MaxIntraOpParallelismDataset",
    "_PrivateThreadPoolDataset",
    "_ModelDataset",
    "_OptimizeDataset",
)
# tf.data's inject_prefetch looks through these before deciding (inject_prefetch.cc).


class _Ring:
    """The process's in-graph record of pulls, and its reader."""

    def __init__(self, tf: Any) -> None:
        with tf.init_scope(), tf.device("/CPU:0"):
            self.pulls = tf.Variable(
                tf.zeros([RING_SIZE, 2], tf.float64), trainable=False, name="gpuwhy_pulls"
            )
            self.count = tf.Variable(
                tf.constant(0, tf.int64), trainable=False, name="gpuwhy_pull_count"
            )
        self._seen = 0
        self._lock = threading.Lock()
        self.lost = 0

    def poll(self) -> list[tuple[int, int]]:
        """New pulls as monotonic-ns (request, delivery) pairs; called on the flusher thread."""
        with self._lock:
            count = int(self.count.numpy())
            if count == self._seen:
                return []
            ring = self.pulls.numpy()
            first = max(self._seen, count - RING_SIZE)
            self.lost += first - self._seen
            self._seen = count
        # tf.timestamp is wall-clock seconds; spans use the monotonic clock.
        offset_ns = time.time_ns() - time.monotonic_ns()
        pulls = []
        for i in range(first, count):
            request_s, wait_s = ring[i % RING_SIZE]
            request = int(request_s * 1e9) - offset_ns
            pulls.append((request, request + int(wait_s * 1e9)))
        return pulls


_ring: _Ring | None = None


def _ring_for(tf: Any) -> _Ring:
    global _ring
    if _ring is None:
        _ring = _Ring(tf)
        emitter.add_poller(_ring.poll)
        # Registered after TensorFlow's own exit handlers, so it runs before them.
        atexit.register(emitter.flush, 1.0)
    return _ring


def unwrappable_reason(dataset: Any) -> str | None:
    """Why the wait of `dataset` cannot be measured in-graph, or None if it can."""
    tf = sys.modules["tensorflow"]
    if not isinstance(dataset, tf.data.Dataset):
        return f"input is a {type(dataset).__name__}, not a tf.data.Dataset (distribution)"
    if tf.distribute.has_strategy():
        return "a tf.distribute strategy is in scope"
    seen = 0
    stack = [dataset]
    while stack and seen < 10_000:
        node = stack.pop()
        seen += 1
        name = type(node).__name__
        if any(word in name for word in _UNWRAPPABLE):
            return f"the pipeline contains {name}"
        inputs = getattr(node, "_inputs", None)
        if callable(inputs):
            stack.extend(inputs())
    return None


def would_inject_prefetch(dataset: Any) -> bool:
    """Whether tf.data itself would append `prefetch(AUTOTUNE)` to `dataset`."""
    options = dataset.options()
    if (
        options.autotune.enabled is False
        or options.experimental_optimization.inject_prefetch is False
    ):
        return False
    node = dataset
    while type(node).__name__ in _PASS_THROUGH:
        inputs = node._inputs()
        if len(inputs) != 1:
            break
        node = inputs[0]
    return "Prefetch" not in type(node).__name__


def _inline_map(dataset: Any, function: Any) -> Any:
    """`dataset.map(function)`, its function run on the thread that asks for the element.

    A plain `map` hands each call to TensorFlow's inter-op thread pool: a thread hand-off per
    batch that cost ~150 µs of CPU per batch here (pool threads spin before they sleep), for
    two functions of a few ops. Run inline, the stages cost ~20 µs, and the request stamp is
    taken on the consumer's own thread. The switch is the map op's own attribute
    (`use_inter_op_parallelism`), reachable only through tf.data's private `_MapDataset`;
    where that is gone, the public `map` does the same work a little slower.
    """
    try:
        from tensorflow.python.data.ops import map_op

        return map_op._MapDataset(
            dataset, function, force_synchronous=True, use_inter_op_parallelism=False
        )
    except (ImportError, AttributeError, TypeError):
        return dataset.map(function)


_cache: weakref.WeakKeyDictionary[Any, tuple[Any, str | None]] = weakref.WeakKeyDictionary()
_stamped: weakref.WeakSet[Any] = weakref.WeakSet()


def is_stamped(dataset: Any) -> bool:
    """Whether `dataset` is one `wrap` made (its last stages are gpuwhy's timing)."""
    try:
        return dataset in _stamped
    except TypeError:
        return False


def wrap(dataset: Any) -> tuple[Any, str | None]:
    """(`dataset` with request/delivery stamps, None) or (`dataset` unchanged, the reason).

    Building the stages traces two small functions (milliseconds), so a dataset used by
    several `fit`/`evaluate`/`predict` calls is wrapped once.
    """
    try:
        return _cache[dataset]
    except (KeyError, TypeError):
        pass
    result = _wrap(dataset)
    with contextlib.suppress(TypeError):  # not weak-referenceable: wrapped again next time
        _cache[dataset] = result
        if result[1] is None:
            _stamped.add(result[0])
    return result


def _wrap(dataset: Any) -> tuple[Any, str | None]:
    reason = unwrappable_reason(dataset)
    if reason is not None:
        return dataset, reason
    tf = sys.modules["tensorflow"]
    ring = _ring_for(tf)
    pulls, count = ring.pulls, ring.count
    source = dataset.prefetch(tf.data.AUTOTUNE) if would_inject_prefetch(dataset) else dataset

    def stamp(_: Any) -> Any:
        return tf.timestamp()

    def record(requested: Any, element: Any) -> Any:
        delivered = tf.timestamp()
        index = count.read_value()
        write = pulls.scatter_nd_update(
            tf.reshape(index % RING_SIZE, [1, 1]),
            tf.reshape(tf.stack([requested, delivered - requested]), [1, 2]),
        )
        with tf.control_dependencies([write]):
            count.assign_add(1)  # after the write: a reader that sees n finds slots < n filled
        return element

    plain = tf.autograph.experimental.do_not_convert  # nothing to convert: skip autograph
    stamps = _inline_map(tf.data.Dataset.range(2**62), plain(stamp))
    stamped = _inline_map(tf.data.Dataset.zip((stamps, source)), plain(record))
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    return stamped.with_options(options), None
