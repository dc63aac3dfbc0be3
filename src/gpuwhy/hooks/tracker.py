"""Phases and steps of each thread: who defines a step, and where it begins and ends.

Every hook funnels into these few functions, which keep per-thread state and append raw records
(`attribution.py`) to the emitter. Rules:

- PHASE spans of one thread never overlap: entering a phase closes the enclosing phase's current
  segment, leaving it opens a new one (innermost wins; shares add up to the whole).
- A STEP span runs from the moment its step began — its data request, or the call that began it,
  whichever came first — to the moment the next step began or its phase ended. It covers its own
  data wait.
- Steps are defined by an *owner*: a framework loop (Keras, Lightning), the user's
  `gpuwhy.step()`, or, in a plain loop, the first hooked iterator the thread pulls from (every
  pull from it starts a step; pulls from other iterators are waits of that step). Torch
  optimizer steps define steps only where nothing else does.
- A step opened without any phase puts the thread in an implicit "train" phase. A plain loop
  whose training the hooks could see (torch: an optimizer step or a backward pass) is named by
  what it does: "train" once it trains; "validation" if it ends without training in a process
  seen training (an evaluation loop), else "train" still (the training may be invisible: a JAX
  step fed by a DataLoader). Its records wait until then.
- Device-to-host synchronisations (`sync_counting.py`) are counted into the open step, else
  into the current phase segment, and leave as one SYNC record per step or segment that had any.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import time
import types
import weakref
from collections.abc import Callable
from typing import Any

from gpuwhy.hooks import emitter
from gpuwhy.hooks.attribution import (
    COPY,
    END_PULL,
    LAST,
    PHASE,
    PULL,
    SRC_BESIDE,
    SRC_HOST,
    STEP,
    SYNC,
)

DEFAULT_PHASE = "train"
CREATED_ATTR = "_gpuwhy_created_ns"
"""Set on a hooked iterator when it is made (framework_hooks.py): where its loop began."""
RELEASE_ATTR = "_gpuwhy_release"
"""Set on an iterator of `released_by_loop` when its data ended: sees it destroyed."""

clock: Callable[[], int] = time.monotonic_ns
"""The hooks' clock; tests may replace it."""

on_step_closed: list[Callable[[str, int, int], None]] = []
"""Each is given (phase, steps, end ns) of every closed step: `gpuwhy try` (try_fixes.py), which
may stop the job there, and `gpuwhy run --profile` over a plain loop (backend_window.py)."""

on_unfed_step: list[Callable[[], None]] = []
"""Each is called, in the loop's thread, at a step boundary of a loop only optimizer steps
bound, when the step that ended read no timed input: generator_pulls.py looks for the loop's
generator."""

before_finalize: list[Callable[[int], None]] = []
"""Each is given the exit time first, to close what only it knows the end of: a JAX evaluation
after the last train step (jax_steps.py)."""

shows_training: Callable[[object], bool] | None = None
"""Set by framework_hooks: whether a plain loop over `source` would show its training to the
hooks (`trained()`), so that its implicit phase can be named by what it does."""

released_by_loop: set[type] = set()
"""Iterator types whose destruction is their loop's own work, done when the loop lets go of
the iterator after its last pull: tf.data's (stopping its pipeline's threads takes up to
~75 ms; framework_hooks.py). The loop's last step and phase end when it is done."""

LET_GO_NS = 5_000_000
"""A `for` loop lets go of its iterator within microseconds of its last pull; an iterator let
go of later was held by the code after the loop, and its destruction is not the loop's. Up to
this gap (the few milliseconds per epoch a loop's phase may differ from its wall time) it is."""

VALIDATION = "validation"
OPTIMIZER_STEPS_A_BATCH = 8
"""A loop whose reads are timed may take several optimizer steps on a batch (a GAN its
discriminator's and its generator's): they end one step, a batch's. More than this many in a
row without a read, and the loop no longer reads (it trains on tensors it holds): each
optimizer step is a step again."""
HELD_RECORDS = 64
"""An unnamed loop whose held records reach this many (22 to 64 steps: one to three records each)
without training is named then (gradient accumulation trains within a few batches): its records
wait no longer."""

_saw_training = False  # `trained()` was called in this process
_unnamed_loops = 0  # threads whose loop waits to be named by whether it trains
awaiting_training = True
"""Whether `trained()` can still change anything: no training was seen yet, or a loop waits
to be named. A hook on every backward pass asks this before calling it."""

_exec_ids = itertools.count()
_next_index: dict[str, int] = {}


class _Step:
    __slots__ = (
        "begun",
        "copied",
        "exec_id",
        "expected",
        "index",
        "mode",
        "phase",
        "prev_exec",
        "pulls",
        "start_ns",
        "stepped",
        "steps",
        "syncs",
    )

    def __init__(self, phase: str, start_ns: int, prev_exec: int | None) -> None:
        self.phase = phase
        self.index = _next_index.get(phase, 0)
        self.start_ns = start_ns
        self.exec_id = next(_exec_ids)
        self.prev_exec = prev_exec
        self.pulls = 0
        self.expected: int | None = None  # pulls a step takes; one more starts the next step
        self.begun = False
        self.mode = 0
        self.steps = 1
        self.syncs = 0  # device-to-host synchronisations seen during the step
        self.stepped = 0  # optimizer steps taken in it after its batch's first (a GAN's)
        self.copied: list[int] | None = None  # [copies, ns, bytes] from pageable host memory


class ThreadState:
    """One thread's phases, open step and step owner."""

    __slots__ = (
        "__weakref__",
        "data_modes",
        "ending",
        "eval_at",
        "eval_forward_ns",
        "eval_synced_ns",
        "fed",
        "framework",
        "implicit_end_ns",
        "in_pull",
        "manual",
        "mute",
        "owner",
        "pending",
        "phases",
        "prev_exec",
        "step",
        "step_done",
    )

    def __init__(self) -> None:
        # [name, segment_start_ns, implicit, syncs, the step owner outside the phase]
        self.phases: list[list[Any]] = []
        self.step: _Step | None = None
        self.prev_exec: int | None = None  # last execution closed in the current loop
        self.manual = False  # the user calls gpuwhy.step() in this thread
        self.framework = 0  # depth of framework loops that define steps
        self.mute = 0  # generic iterator hooks stay silent (a framework measures itself)
        self.in_pull = False  # a timed pull is running: nested hooks must not time it again
        self.owner: weakref.ref[Any] | None = None  # the iterator that defines steps
        self.data_modes: dict[str, int] = {}  # how a framework phase measures its data wait
        self.implicit_end_ns: int | None = None
        self.eval_at: int | None = None  # the trained model was put in eval mode (model_mode)
        # Since then: when its last forward returned, and the first sync after it (the host
        # waiting for that forward's device work): where an evaluation the job's exit ends, with
        # no `.train()` after it, ends.
        self.eval_forward_ns: int | None = None
        self.eval_synced_ns: int | None = None
        # A loop only optimizer steps bound reads a generator that is timed (generator_pull):
        # its steps are its batches, whatever the optimizer steps each takes.
        self.fed = False
        # The records of an implicit phase not yet named (train, or an evaluation): held back
        # until the loop trains or ends.
        self.pending: list[tuple[Any, ...]] | None = None
        # Has the device run the last execution? (a non-blocking readiness check, such as the
        # bound `jax.Array.is_ready` or CUDA event `query`: nothing made per step; set by a
        # framework loop that can tell; None where nothing can)
        self.step_done: Callable[[], bool] | None = None
        # A plain loop's data ended and its iterator is not yet destroyed (`released_by_loop`).
        self.ending: _Ending | None = None


_local = threading.local()
_ending_threads: dict[ThreadState, None] = {}  # states with an `ending`: settled at exit
# The main thread's state, also held here: every hook asks for its thread's state, several
# times a step, and between steps the framework's compute has evicted the `threading.local`
# lookup's memory from the CPU caches (~2 µs a step where a plain comparison costs ~0.2).
_get_ident = threading.get_ident
_main_ident = threading.main_thread().ident
_main_state: ThreadState | None = None


def state() -> ThreadState:
    """This thread's state (created on first use); a loop's ending is settled first."""
    st = _main_state if _get_ident() == _main_ident else None
    if st is None:
        st = _thread_state()
    if st.ending is not None:
        _settle_ending(st)
    return st


def _thread_state() -> ThreadState:
    global _main_state
    try:
        st: ThreadState = _local.state
    except AttributeError:
        st = _local.state = ThreadState()
    if _get_ident() == _main_ident:
        _main_state = st
    return st


def reset() -> None:
    """Forget this thread's phases and steps, and what the process was seen doing (tests start
    each from nothing)."""
    global _main_state, _saw_training, _unnamed_loops, awaiting_training
    _local.__dict__.clear()
    _main_state = None
    _ending_threads.clear()
    _next_index.clear()
    _saw_training, _unnamed_loops, awaiting_training = False, 0, True


def current_phase() -> str | None:
    st = state()
    return st.phases[-1][0] if st.phases else None


# ---------------------------------------------------------------------------------- phases


def push_phase(name: str, t: int, *, implicit: bool = False) -> int:
    """Enter phase `name` at `t`; returns the stack depth to `unwind` to when it ends."""
    st = state()
    close_step(st, t)
    depth = len(st.phases)
    if st.phases:
        _emit_segment(st, st.phases[-1], t)
    # A phase entered inside a loop (an evaluation each epoch) has its own loop: the outer
    # loop's iterator defines steps again once the phase is left.
    st.phases.append([name, t, implicit, 0, None if implicit else st.owner])
    if not implicit:
        st.owner = None
    st.prev_exec = None
    return depth


def unwind(depth: int, t: int) -> None:
    """Leave every phase above stack depth `depth` at `t` (the normal exit, and after errors)."""
    _unwind(state(), depth, t)


def _unwind(st: ThreadState, depth: int, t: int) -> None:
    if len(st.phases) <= depth:
        return
    close_step(st, t)
    while len(st.phases) > depth:
        segment = st.phases.pop()
        _emit_segment(st, segment, t)
        if not segment[2]:
            st.owner = segment[4]
    if st.phases:
        st.phases[-1][1] = t
    st.prev_exec = None


def new_round(t: int) -> None:
    """The current phase begins a new round at `t` (the next epoch of one Keras `fit`): what
    it did so far is one PHASE span and the next begins here, so its rounds are told apart
    (analysis/steady.py) as a loop's epochs are."""
    st = state()
    if not st.phases or st.phases[-1][2]:
        return  # no phase, or an implicit one: its loop's iterator marks its rounds
    close_step(st, t)
    segment = st.phases[-1]
    _emit_segment(st, segment, t)
    segment[1] = t
    st.prev_exec = None


def _emit_segment(st: ThreadState, segment: list[Any], t: int) -> None:
    if st.pending is not None and segment[2]:  # the unnamed loop's phase, ending untrained
        _settle(st, segment, _untrained_name())
    if t > segment[1]:
        emitter.emit((PHASE, segment[0], segment[1], t))
    if segment[3]:  # syncs in the phase outside any step (between epochs, say)
        emitter.emit((SYNC, segment[0], segment[3], 0, t))
        segment[3] = 0


def _end_implicit(st: ThreadState, t: int) -> None:
    if st.phases and st.phases[-1][2]:
        _unwind(st, len(st.phases) - 1, t)


# ---------------------------------------------------------------------------------- steps


def _open(st: ThreadState, t: int, *, unnamed: bool = False) -> _Step:
    global _unnamed_loops, awaiting_training
    if not st.phases:
        push_phase(DEFAULT_PHASE, t, implicit=True)
        if unnamed and st.pending is None:
            st.pending = []
            _unnamed_loops += 1
            awaiting_training = True
    step = st.step = _Step(st.phases[-1][0], t, st.prev_exec)
    return step


def trained() -> None:
    """The thread trained a model (an optimizer step, a backward pass): an unnamed loop's phase
    is "train". O(1) when there is none."""
    _trained(state())


def _trained(st: ThreadState) -> None:
    global _saw_training, awaiting_training
    _saw_training = True
    if st.pending is not None:
        _settle(st, st.phases[0], DEFAULT_PHASE)
    awaiting_training = _unnamed_loops > 0


def _untrained_name() -> str:
    """An unnamed loop that did not train: an evaluation, where training is known to show."""
    return VALIDATION if _saw_training else DEFAULT_PHASE


def _settle(st: ThreadState, segment: list[Any], name: str) -> None:
    """Name the unnamed implicit phase (its `segment`) and send its held records so named."""
    global _unnamed_loops
    if st.pending is not None:
        _unnamed_loops -= 1
    pending, st.pending = st.pending or [], None
    segment[0] = name
    for record in pending:
        if record[0] == STEP:
            index = _next_index.get(name, 0)
            _next_index[name] = index + record[5]
            record = (STEP, name, index, *record[3:])
        else:
            record = (record[0], name, *record[2:])
        emitter.emit(record)
    step = st.step
    if step is not None:  # opened while the phase was unnamed: its index too is given now
        step.phase = name
        step.index = _next_index.get(name, 0)


def close_step(st: ThreadState, t: int, *, last: bool = True) -> None:
    """Emit the open step as ending at `t`; `last`: no next step of its loop follows at once."""
    step = st.step
    if step is None:
        return
    st.step = None
    steps = step.pulls if step.mode & SRC_HOST and step.pulls else step.steps
    mode = step.mode | LAST if last else step.mode
    record = (
        STEP,
        step.phase,
        step.index,
        step.start_ns,
        t,
        steps,
        step.exec_id,
        step.prev_exec,
        mode,
    )
    named = st.pending is None  # else an unnamed loop's step: its index is given when named
    if named:  # (`_send` in one call fewer: this runs every step)
        emitter.emit(record)
    else:
        _send(st, record)
    if step.syncs:
        _send(st, (SYNC, step.phase, step.syncs, 1, t))
    if step.copied is not None:
        _send(st, (COPY, step.phase, *step.copied, t))
    if named:
        _next_index[step.phase] = step.index + steps
    st.prev_exec = step.exec_id
    st.implicit_end_ns = t
    if on_step_closed:
        _call_each(on_step_closed, "a step hook", step.phase, steps, t)


def begin_step(
    t: int,
    *,
    steps: int = 1,
    expected: int | None = 1,
    mode: int = 0,
    st: ThreadState | None = None,
) -> int:
    """An owner begins a step at `t`; returns its execution id. `st`: this thread's `state()`,
    where the caller holds it already.

    A step whose data arrived before it began (Keras on torch, `for batch in loader:
    gpuwhy.step()`) was opened by that pull: it is adopted, not closed.
    """
    if st is None:
        st = state()
    step = st.step
    if step is None or step.begun:
        close_step(st, t, last=False)
        step = _open(st, t)
    step.begun = True
    step.expected = expected
    step.mode |= mode
    step.steps = steps
    return step.exec_id


def end_step(t: int, exec_id: int | None = None) -> None:
    """Close the open step at `t` (only if it is `exec_id`, when given)."""
    st = state()
    if st.step is not None and (exec_id is None or st.step.exec_id == exec_id):
        close_step(st, t)


def _steps_by_optimizer(st: ThreadState) -> bool:
    """Whether only optimizer steps bound this thread's steps: no framework loop, no
    `gpuwhy.step()` and no hooked iterator defines them."""
    return not (st.framework or st.manual or (st.owner is not None and st.owner() is not None))


def boundary(t: int, *, dispatched: bool = False) -> int | None:
    """A step boundary seen from outside any loop (a torch optimizer step, a JAX train step):
    used only where no framework, no `gpuwhy.step()` and no hooked iterator defines steps.

    `dispatched`: the call that ends the step only queued its work on the device (a JAX
    step); the step that work belongs to is returned, for a DONE record to say when it is done
    (completion.py): the one that ended here (or at the batch's first such call, for a later
    one on the same batch), or, where a hooked iterator or `gpuwhy.step()` defines steps, the
    open one. None where there is none (a framework's loop times itself)."""
    return _boundary(state(), t, dispatched)


def optimizer_step(t: int) -> None:
    """An optimizer step ended at `t`: the thread trains (`trained()`), and the step boundary
    it is (`boundary()`), in one call: a torch loop makes one every step."""
    st = state()
    _trained(st)
    _boundary(st, t, False)


def _boundary(st: ThreadState, t: int, dispatched: bool) -> int | None:
    st.eval_at = None  # an optimizer step since `.eval()`: that was no evaluation
    if not _steps_by_optimizer(st):
        if dispatched and st.step is not None and not st.framework:
            return st.step.exec_id
        return None
    current = st.step
    unfed = current is not None and not current.pulls
    if unfed and st.fed and current is not None:
        if current.stepped < OPTIMIZER_STEPS_A_BATCH:  # the batch's next optimizer step
            current.stepped += 1
            # Its work is done when the step that ended at the batch's first is: the next
            # read waits for both.
            return st.prev_exec if dispatched else None
        st.fed = False
    ended = current.exec_id if current is not None else None
    close_step(st, t, last=False)
    step = _open(st, t)
    step.begun = True
    step.expected = None
    if unfed:
        _call_each(on_unfed_step, "a step hook")
    return ended if dispatched else None


def model_mode(training: bool, t: int) -> None:
    """The trained model was switched to eval (`training` False) or train mode at `t`, in a loop
    only optimizer steps bound: from `.eval()` to `.train()` with no optimizer step between, the
    job evaluated it (a validation loop over tensors or lists, which no hooked iterator times).
    That span becomes a "validation" phase once `.train()` shows where it ended (or, for the
    last one, the job's exit: `finalize`); the optimizer step left open at `.eval()` ends there
    and, as the tail of an epoch, is no step."""
    st = state()
    step = st.step
    if not training:
        if st.eval_at is None and _saw_training and step is not None and _steps_by_optimizer(st):
            st.eval_at = t
            st.eval_forward_ns = st.eval_synced_ns = None
        return
    began, st.eval_at = st.eval_at, None
    if began is None or step is None or not st.phases or not _steps_by_optimizer(st):
        return
    st.step = None
    depth = push_phase(VALIDATION, began)
    st.phases[-1][3] += step.syncs  # what the evaluation synced, the step's tail held
    unwind(depth, t)


def evaluated(t: int) -> None:
    """The model put in eval mode (`model_mode`) returned from a forward call at `t`."""
    st = state()
    if st.eval_at is not None:
        st.eval_forward_ns, st.eval_synced_ns = t, None


def _evaluation_end(st: ThreadState) -> int | None:
    """Where an evaluation still open ended: at the first sync after its last forward (on a
    device, the host waiting for that forward's work), else when that forward returned (on the
    CPU it ran in the call); None where it ran no forward."""
    if st.eval_at is None:
        return None
    return st.eval_synced_ns or st.eval_forward_ns


def pageable_copy(started: int, ended: int, size: int) -> None:
    """The job copied `size` bytes from pageable host memory to a device, the host blocked in
    the call from `started` to `ended` (sync_counting.py): summed into the open step, else sent
    at once for the current phase; outside every phase it is dropped."""
    st = state()
    step = st.step
    if step is not None:
        copied = step.copied
        if copied is None:
            step.copied = [1, ended - started, size]
        else:
            copied[0] += 1
            copied[1] += ended - started
            copied[2] += size
    elif st.phases:
        _send(st, (COPY, st.phases[-1][0], 1, ended - started, size, ended))


def _send(st: ThreadState, record: tuple[Any, ...]) -> None:
    """Emit `record`, or hold it with the unnamed loop's records until that loop is named: at
    most HELD_RECORDS, then a loop that has not trained yet is taken as untrained."""
    pending = st.pending
    if pending is None:
        emitter.emit(record)
        return
    pending.append(record)
    if len(pending) >= HELD_RECORDS:
        _settle(st, st.phases[0], _untrained_name())


def count_sync() -> None:
    """The job read a device value on the host (it waited for the device): O(1), a counter.

    Counted into the open step, else into the current phase; outside every phase it is not
    attributable to any and is dropped.
    """
    st = state()
    if st.eval_forward_ns is not None and st.eval_synced_ns is None and st.eval_at is not None:
        st.eval_synced_ns = clock()
    step = st.step
    if step is not None:
        step.syncs += 1
    elif st.phases:
        st.phases[-1][3] += 1


# ---------------------------------------------------------------------------------- pulls


def pull(
    source: object,
    request_ns: int,
    delivery_ns: int,
    ok: bool,
    *,
    force: bool = False,
    busy: int = 0,
) -> None:
    """A pull of input from `source` took [request_ns, delivery_ns]; `ok` False: no data.

    `force`: record it even where generic hooks are muted (a framework timing its own input).
    `busy`: what a readiness check saw around the pull (attribution.BUSY_* bits).
    """
    pull_in(state(), source, request_ns, delivery_ns, ok, force, busy)


def pull_in(
    st: ThreadState,
    source: object,
    request_ns: int,
    delivery_ns: int,
    ok: bool,
    force: bool,
    busy: int,
) -> None:
    """`pull()` for a caller that holds this thread's `state()` (taken as the pull began)."""
    if st.ending is not None:  # (the pull may have destroyed an iterator that was let go of)
        _settle_ending(st)
    if st.mute and not force:
        return
    if not (st.framework or st.manual):
        _auto_pull(st, source, request_ns, delivery_ns, ok, busy)
        return
    # A framework's loop or gpuwhy.step() owns the steps (inline: every such pull runs it).
    step = st.step
    full = (
        step is not None
        and step.begun
        and step.expected is not None
        and step.pulls >= step.expected
    )
    if not ok:
        if full:
            close_step(st, request_ns)  # the data ended: so did the step that had its batch
        return
    if full:
        close_step(st, request_ns, last=False)
        step = None
    if step is None:
        if not st.phases and not st.manual:
            return  # a pull outside any phase (a framework peeking at its input)
        step = _open(st, request_ns)
    step.pulls += 1
    step.mode |= SRC_HOST
    emitter.emit((PULL, step.exec_id, request_ns, delivery_ns, busy))


def generator_pull(request_ns: int, delivery_ns: int, busy: int = 0) -> None:
    """A read of a plain loop's own generator (generator_pulls.py) where only optimizer steps
    bound the steps: a wait of the open step, not a step of its own (a step may read several
    batches, as gradient accumulation does, or take several optimizer steps on one, as a GAN
    does: `OPTIMIZER_STEPS_A_BATCH`)."""
    st = state()
    step = st.step
    if step is None or st.mute or st.in_pull or not _steps_by_optimizer(st):
        return
    step.pulls += 1
    step.mode |= SRC_BESIDE
    st.fed = True
    emitter.emit((PULL, step.exec_id, request_ns, delivery_ns, busy))


def _auto_pull(st: ThreadState, source: object, r: int, d: int, ok: bool, busy: int = 0) -> None:
    owner = st.owner() if st.owner is not None else None
    if owner is None:
        if not ok:
            return
        owner = source
        try:
            st.owner = weakref.ref(source, _owner_gone_callback(st))
        except TypeError:  # not weak-referenceable: it owns steps until another takes over
            st.owner = None
        r = _loop_start(st, source, r)
    if source is owner:
        if not ok:
            if type(source) not in released_by_loop or not _await_release(st, source, r, d):
                _end_of_data(st, r, d)
            st.owner = None
            return
        close_step(st, r, last=False)
        unnamed = not st.phases and shows_training is not None and shows_training(source)
        step = _open(st, r, unnamed=unnamed)  # not "begun": a gpuwhy.step() adopts it
        step.expected = 1
    step_or_none = st.step
    if ok and step_or_none is not None:
        step_or_none.pulls += 1
        step_or_none.mode |= SRC_HOST
        emitter.emit((PULL, step_or_none.exec_id, r, d, busy))


def _loop_start(st: ThreadState, source: object, request_ns: int) -> int:
    """When a loop over a new iterator began: when the iterator was made (`for x in loader`
    makes it just before its first pull: building the pipeline, starting workers), unless this
    thread's last step or its current phase came after that (an iterator made long before)."""
    created = getattr(source, CREATED_ATTR, None)
    if type(created) is not int or created >= request_ns:
        return request_ns
    if st.implicit_end_ns is not None and created < st.implicit_end_ns:
        return request_ns
    if st.step is not None or (st.phases and created < st.phases[-1][1]):
        return request_ns
    return created


def _end_of_data(st: ThreadState, request_ns: int, delivery_ns: int) -> None:
    """The owner's data ended: its last step waited for that answer, and ends with it."""
    step = st.step
    if step is not None and delivery_ns > request_ns:
        step.mode |= END_PULL
        emitter.emit((PULL, step.exec_id, request_ns, delivery_ns, 0))
    close_step(st, delivery_ns)
    st.owner = None
    _end_implicit(st, delivery_ns)


def owner_destroyed(source: object, start_ns: int, end_ns: int) -> None:
    """`source`'s destructor ran from `start_ns` to `end_ns` on this thread (a DataLoader shutting
    its workers down). If it still owned this thread's steps, its loop was left early (`break`,
    an exception): the loop waited that long for its input to end, as at the end of its data,
    and its last step ends there, not at whatever the program does next."""
    if _inside_tracker():
        return  # collected inside the tracker: the owner's weakref callback ends the loop
    st = state()
    if st.owner is None or st.owner() is not source:
        return
    _end_of_data(st, start_ns, end_ns)


class _Ending:
    """A plain loop's data ended at `delivery`; when its iterator was let go of and destroyed."""

    __slots__ = ("delivery", "let_go", "released", "request", "state", "thread")

    def __init__(self, st: ThreadState, request: int, delivery: int) -> None:
        self.state = weakref.ref(st)
        self.thread = threading.get_ident()
        self.request = request
        self.delivery = delivery
        self.let_go: int | None = None
        self.released: int | None = None

    def note_let_go(self, _: object) -> None:  # a weakref callback: before the destruction
        self.let_go = clock()


class _ReleaseWatch:
    """Set on the iterator as its last attribute: an object's attributes are released in the
    order they were set, so this one goes when the iterator's own state has been destroyed."""

    __slots__ = ("ending", "ref")

    def __init__(self, ending: _Ending, source: object) -> None:
        self.ending = ending
        self.ref = weakref.ref(source, ending.note_let_go)

    def __del__(self) -> None:
        ending = self.ending
        ending.released = clock()
        st = ending.state()
        if st is None or st.ending is not ending or threading.get_ident() != ending.thread:
            return  # the thread settles it at its next hook call, or at exit
        if _inside_tracker():
            return  # destroyed by a collection inside the tracker: settled when it returns
        with contextlib.suppress(Exception):  # a destructor must never raise
            _settle_ending(st)


def _inside_tracker() -> bool:
    """Whether the caller was called (by a garbage collection, say) from inside this module."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_globals is globals():
            return True
        frame = frame.f_back
    return False


def _await_release(st: ThreadState, source: object, request: int, delivery: int) -> bool:
    """Leave the loop's last step open until its iterator is destroyed; False if it cannot be
    watched (then the loop ends at its last pull)."""
    ending = _Ending(st, request, delivery)
    try:
        setattr(source, RELEASE_ATTR, _ReleaseWatch(ending, source))
    except Exception:
        return False
    st.ending = ending
    _ending_threads[st] = None
    return True


def _settle_ending(st: ThreadState) -> None:
    """End the loop whose data ended: when its iterator was destroyed if the loop let go of it
    at once, else at its last pull (the iterator outlived the loop)."""
    ending, st.ending = st.ending, None
    _ending_threads.pop(st, None)
    if ending is None:
        return
    end = ending.delivery
    let_go, released = ending.let_go, ending.released
    if let_go is not None and released is not None and let_go - ending.delivery <= LET_GO_NS:
        end = max(end, released)
    _end_of_data(st, ending.request, end)


def _owner_gone_callback(st: ThreadState) -> Callable[[weakref.ref[Any]], None]:
    """When the owning iterator dies (a loop left by `break`), its last step ends there."""
    state_ref = weakref.ref(st)

    def gone(ref: weakref.ref[Any]) -> None:
        owner_state = state_ref()
        if owner_state is None or owner_state.owner is not ref:
            return
        try:
            t = clock()
            owner_state.owner = None
            close_step(owner_state, t)
            _end_implicit(owner_state, t)
        except Exception:  # a GC callback must never raise
            pass

    return gone


def finalize(t: int) -> None:
    """Interpreter exit: an evaluation still open ends with its last forward (`evaluated`); an
    implicit phase ends with its last closed step; an open step whose end was never seen is
    dropped (its end would be the program's teardown, not training)."""
    _call_each(before_finalize, "an exit hook", t)
    for other in list(_ending_threads):  # loops of finished threads whose iterator lives on
        _settle_ending(other)
    st = state()
    ended = _evaluation_end(st)
    if ended is not None:  # the last evaluation, which the exit ended rather than `.train()`
        model_mode(True, ended)
    step = st.step
    if step is not None and st.phases:  # the step is dropped; its syncs and copies stay
        st.phases[-1][3] += step.syncs
        if step.copied is not None:
            _send(st, (COPY, step.phase, *step.copied, t))
    st.step = None
    if st.phases and st.phases[-1][2] and st.implicit_end_ns is not None:
        unwind(len(st.phases) - 1, st.implicit_end_ns)


def _call_each(hooks: list[Callable[..., None]], what: str, *args: Any) -> None:
    """Call each of `hooks` with `args`; one that fails is reported once, never raised into
    the user's loop."""
    for hook in hooks:
        try:
            hook(*args)
        except Exception as error:
            emitter.report_once("step.hook", f"{what} failed: {error!r}")


def _reset_after_fork() -> None:
    global _local, _main_ident, _main_state, _unnamed_loops, awaiting_training
    _local = threading.local()
    _unnamed_loops, awaiting_training = 0, True  # the child's loops are its own
    _main_ident, _main_state = _get_ident(), None  # the forking thread is the child's only one
    _ending_threads.clear()


os.register_at_fork(after_in_child=_reset_after_fork)
emitter.on_exit(lambda: finalize(clock()))
