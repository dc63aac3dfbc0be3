"""Raw hook records → spans, run on the flusher thread (never on the training thread).

Hooks append small tuples (below). Most become a `Span` at once; a step whose data wait depends
on facts that arrive later (when the device finished the previous step, the pulls an input
pipeline recorded inside a compiled function) is held until those facts arrive, at most
`hold_ns`, then resolved with what is known.

The data wait of a step (an *execution*: one call of a compiled function that may run several
steps) is the time its compute stood still for input — not the time a pull took, which on an
asynchronous backend overlaps the previous step's compute:

- the first pull of an execution waits from `max(request, previous execution done)` until
  delivery; where a non-blocking readiness check of the previous results was made around the
  pull (JAX, CUDA), it decides: idle at the request, the whole pull waited; still busy at the
  delivery, none of it did;
- a later pull inside the same execution (Keras `steps_per_execution > 1`: TensorFlow's
  in-graph loop and JAX's host loop both request batch k+1 when step k's compute starts)
  overlaps step k's compute, which began no earlier than batch k's delivery d_k and took `c`:
  it waits only from `max(request, d_k + c)` to its delivery. Where Keras's in-graph loop
  stamped when each step's compute ended (tfdata_wait.timing_steps), `d_k + c` is that stamp;
  elsewhere `c` comes from the execution's tail: with R the time the execution was done and
  (r, d) its last pull, `c = min(R - d, (R - r) / 2)` (data late: the last compute ran from d to
  R; data early: the last two computes ran back to back from r to R). docs/data-wait.md
  derives it.
- pulls that happen before the compiled call (TensorFlow `predict`) never overlap: all wait.

Device-to-host synchronisations arrive as one SYNC record per step (or phase segment) that had
any; they are summed per phase and sent as one compact `Event(kind="sync")` per phase at most
every `SYNC_EVENT_INTERVAL_NS` (and on every explicit flush and at exit), never one per sync.
Host-to-device copies from pageable memory (COPY records: their count, the host's time in them,
their bytes) are summed and sent the same way, as `Event(kind="pageable_copy")`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

from gpuwhy.model import Event, Span, SpanKind
from gpuwhy.wire import COPY_EVENT

# Raw record tags (first tuple field).
PHASE = 0  # (PHASE, phase, start_ns, end_ns)
STEP = 1  # (STEP, phase, index, start_ns, end_ns, steps_hint, exec_id, prev_exec_id, mode)
PULL = 2  # (PULL, exec_id, request_ns, delivery_ns, busy)      a pull seen on the host
DONE = 3  # (DONE, exec_id, t_ns)                 the execution's results exist (earliest wins)
SYNC = 4  # (SYNC, phase, syncs, steps, t_ns)  syncs of one step (steps=1) or phase segment (0)
COPY = 5  # (COPY, phase, copies, ns, bytes, t_ns)  a step's (or a segment's) pageable copies

COMPUTE_END = -1
"""The delivery of an in-graph record that is no pull: (t, COMPUTE_END), a step's compute ended
at t."""

# STEP mode bits.
SRC_HOST = 1  # pulls arrive as PULL records
SRC_GRAPH = 2  # pulls come from an in-graph poller, matched to the step by time
OVERLAP = 4  # later pulls of an execution overlap the previous step's compute
EXPECT_DONE = 8  # DONE records will come for this loop's executions
LAST = 16  # the step was ended by its phase or epoch ending, not by the next step beginning
END_PULL = 32  # its last PULL found the data's end: a wait of the loop, not another step
SRC_BESIDE = 64  # pulls arrive as PULL records, but steps are counted apart (optimizer steps)

# PULL busy bits: a non-blocking readiness check of the previous execution's results, taken
# when the pull was requested and when it was delivered (JAX `is_ready`, a CUDA event query).
CHECKED = 1  # the busy checks were made (the other bits say what they found)
BUSY_AT_REQUEST = 2  # the device was still running the previous execution at the request
BUSY_AT_DELIVERY = 4  # ... and still at the delivery: the pull hid behind compute entirely
READY_AT_REQUEST = 8  # the batch was already made when asked for (a worker's queue held it):
# the pull only handed it over, a cost the input made free still pays, not a wait, but for
# the time it waited on a worker that was computing (`held_bits`, hooks/worker_handover.py)
_HELD_SHIFT = 8


def held_bits(held_ns: int) -> int:
    """Busy bits that carry, above the flags, how long a hand-over waited on its worker."""
    return max(0, held_ns) << _HELD_SHIFT


HOLD_NS = 2_000_000_000
"""How long a step waits for late facts before it is resolved without them."""

SYNC_EVENT_INTERVAL_NS = 10_000_000_000
"""Sync counts are summed this long before they leave as events (a few rows per minute)."""

SYNC_EVENT = "sync"
"""`Event.kind` of the counts: data {"phase", "count": syncs, "steps": steps that synced,
"pid"}."""

_STALE_NS = 10_000_000_000  # facts no held step can still need
_STEP, _WAIT = SpanKind.STEP, SpanKind.WAIT  # read every step: names of the module, not the enum's
_KEEP = 4096  # facts kept before stale ones are swept


# A step held for facts still to come: (its STEP record, its pulls, when it arrived). A tuple,
# not an object: one is made for nearly every step where completion facts come.
_Held = tuple[tuple[Any, ...], list[tuple[int, int]], int]


class Attributor:
    """Stateful converter from raw hook records to `Span`s; one per process, flusher-owned."""

    def __init__(
        self,
        *,
        hold_ns: int = HOLD_NS,
        sync_interval_ns: int = SYNC_EVENT_INTERVAL_NS,
        span: Callable[..., Any] = Span,
    ) -> None:
        # What a span is made as, from Span's fields in order: the `Span`, or the socket's line
        # for it (`wire.span_line`) where the sink only writes lines.
        self.span = span
        self.hold_ns = hold_ns
        self.sync_interval_ns = sync_interval_ns
        self._syncs: dict[str, list[int]] = {}  # phase -> [syncs, steps that synced, last t]
        self._copies: dict[str, list[int]] = {}  # phase -> [copies, ns, bytes, last t]
        self._syncs_sent_ns: int | None = None
        self._host_pulls: dict[int, list[tuple[int, int]]] = {}
        self._graph_pulls: deque[tuple[int, int]] = deque()
        self._compute_ends: deque[tuple[int, int]] = deque()  # (t, COMPUTE_END), in-graph
        self._ends_of: dict[int, list[int]] = {}  # exec -> its steps' compute ends
        self._done: dict[int, int] = {}
        self._held: dict[int, _Held] = {}
        self._compute_ns: dict[str, int] = {}  # last per-step compute estimate of each phase
        self._busy: dict[tuple[int, int], int] = {}  # (exec, request) -> busy bits
        self._unknown: set[str] = set()

    def feed(
        self,
        items: list[Any],
        graph_pulls: list[tuple[int, int]],
        now_ns: int,
        pid: int,
        *,
        counts: bool = False,
    ) -> list[Any]:
        """Convert `items`; `graph_pulls` are the in-graph pulls polled after `items` drained.

        `counts`: send the summed sync counts now (an explicit flush), not only once their
        interval has passed.
        """
        out: list[Any] = []
        for record in sorted(graph_pulls):
            (self._compute_ends if record[1] == COMPUTE_END else self._graph_pulls).append(record)
        for item in items:
            if type(item) is not tuple:  # a span or an event made by a hook: passed on
                if type(item) is Span and item.pid is None:
                    item = dataclasses.replace(item, pid=pid)
                out.append(item)
                continue
            tag = item[0]  # (the two every step sends, first)
            if tag == STEP:
                mode = item[8]
                if mode & SRC_GRAPH:
                    pulls = _take(self._graph_pulls, item[3], item[4])
                    if self._compute_ends:
                        ends = _take(self._compute_ends, item[3], item[4])
                        if ends:
                            self._ends_of[item[6]] = [t for t, _ in ends]
                else:
                    pulls = self._host_pulls.pop(item[6], [])
                if mode & EXPECT_DONE or self._done or self._busy:
                    self._held[item[6]] = (item, pulls, now_ns)
                else:  # no completion facts in this process: none can come for this step
                    self._resolve(out, item, pulls, pid)
            elif tag == PULL:
                self._host_pulls.setdefault(item[1], []).append((item[2], item[3]))
                if item[4] & CHECKED:
                    self._busy[(item[1], item[2])] = item[4]
            elif tag == PHASE:
                out.append(self.span(item[1], SpanKind.PHASE, item[2], item[3], None, 1, pid))
            elif tag == DONE:  # several stamps may come (return, batch end): the earliest
                first = self._done.get(item[1])
                if first is None or item[2] < first:
                    self._done[item[1]] = item[2]
            elif tag == SYNC:
                summed = self._syncs.setdefault(item[1], [0, 0, 0])
                summed[0] += item[2]
                summed[1] += item[3]
                summed[2] = max(summed[2], item[4])
            elif tag == COPY:
                summed = self._copies.setdefault(item[1], [0, 0, 0, 0])
                summed[0] += item[2]
                summed[1] += item[3]
                summed[2] += item[4]
                summed[3] = max(summed[3], item[5])
        for exec_id, (record, pulls, arrived_ns) in list(self._held.items()):
            if self._ready(record, pulls) or now_ns - arrived_ns >= self.hold_ns:
                del self._held[exec_id]
                self._resolve(out, record, pulls, pid)
        self._forget_stale(now_ns)
        if self._syncs_sent_ns is None:
            self._syncs_sent_ns = now_ns
        if (self._syncs or self._copies) and (
            counts or now_ns - self._syncs_sent_ns >= self.sync_interval_ns
        ):
            out.extend(self._sync_events(now_ns, pid))
        return out

    def finish(self, pid: int) -> list[Any]:
        """Resolve every held step with what is known (interpreter exit)."""
        out: list[Any] = []
        for record, pulls, _ in self._held.values():
            self._resolve(out, record, pulls, pid)
        self._held.clear()
        out.extend(self._sync_events(None, pid))
        return out

    def _sync_events(self, now_ns: int | None, pid: int) -> list[Event]:
        events = [
            Event(
                t_ns,
                SYNC_EVENT,
                "device-to-host synchronisations",
                {"phase": phase, "count": syncs, "steps": steps, "pid": pid},
            )
            for phase, (syncs, steps, t_ns) in self._syncs.items()
        ]
        events.extend(
            Event(
                t_ns,
                COPY_EVENT,
                "host-to-device copies from pageable memory",
                {"phase": phase, "count": copies, "ns": ns, "bytes": size, "pid": pid},
            )
            for phase, (copies, ns, size, t_ns) in self._copies.items()
        )
        self._syncs.clear()
        self._copies.clear()
        if now_ns is not None:
            self._syncs_sent_ns = now_ns
        return events

    # ------------------------------------------------------------------------------ internals

    def _ready(self, record: tuple[Any, ...], pulls: list[tuple[int, int]]) -> bool:
        mode, exec_id, prev = record[8], record[6], record[7]
        if not mode & EXPECT_DONE or not (pulls or mode & LAST):
            # A read that found the previous step running and saw it finish needs that step's
            # DONE, which a plain JAX loop's helper thread sends (completion.py).
            return not self._finished_during(exec_id, pulls, prev)
        if prev is not None and prev not in self._done:
            return False
        needs_own = mode & LAST or (mode & OVERLAP and len(pulls) > 1)
        return not (needs_own and exec_id not in self._done)

    def _finished_during(
        self, exec_id: int, pulls: list[tuple[int, int]], prev: int | None
    ) -> bool:
        """Whether the first read found the previous execution running and saw it finish,
        while its DONE has not come yet."""
        if not pulls or prev is None or prev in self._done:
            return False
        busy = self._busy.get((exec_id, min(pulls)[0]), 0)
        return busy & (BUSY_AT_REQUEST | BUSY_AT_DELIVERY) == BUSY_AT_REQUEST

    def _resolve(
        self, out: list[Any], record: tuple[Any, ...], pulls: list[tuple[int, int]], pid: int
    ) -> None:
        """Append the spans of a step's `record` and its `pulls` to `out`."""
        _, phase, index, start, end, hint, exec_id, prev, mode = record
        ends = self._ends_of.pop(exec_id, None) if self._ends_of else None
        if len(pulls) > 1:  # (most steps pull once: no copy to sort)
            pulls = sorted(pulls)
        end_pull = pulls.pop() if mode & END_PULL and len(pulls) > 1 else None
        if not pulls and mode & (SRC_HOST | SRC_GRAPH):
            return  # the loop asked for data and got none: the end of the data, not a step
        steps = len(pulls) if pulls and not mode & SRC_BESIDE else hint
        done = self._done.get(exec_id)
        if mode & LAST and done is not None and start < done < end:
            end = done  # the loop's last step ends with its results, not with epoch-end work
        out.append(self.span(phase, _STEP, start, end, index, steps, pid))
        if end_pull is not None:  # the loop stood still until its input said "no more"
            out.append(self.span(phase, _WAIT, *end_pull, index, 0, pid))
        if not pulls:
            return
        busy = 0
        if self._busy:  # (only where a readiness check ran: none on a CPU)
            busy = self._busy.pop((exec_id, pulls[0][0]), 0)
            for r, _ in pulls[1:]:
                self._busy.pop((exec_id, r), None)
        wait_ns = self._exposed_wait(phase, pulls, self._done.get(prev), exec_id, mode, busy, ends)
        if wait_ns is None:
            if phase not in self._unknown:
                self._unknown.add(phase)
                message = "data wait unknown for some steps: no completion time"
                reason = "some of its steps have no completion time"
                data = {"phase": phase, "reason": reason}
                out.append(Event(end, "data_wait_unavailable", message, data))
            return
        delivered = pulls[-1][1]
        out.append(self.span(phase, _WAIT, delivered - wait_ns, delivered, index, steps, pid))

    def _exposed_wait(
        self,
        phase: str,
        pulls: list[tuple[int, int]],
        prev_done_ns: int | None,
        exec_id: int,
        mode: int,
        busy: int = 0,
        ends: list[int] | None = None,
    ) -> int | None:
        request, delivered = pulls[0]
        if busy & BUSY_AT_DELIVERY:
            request = delivered  # the device never idled
        elif busy & READY_AT_REQUEST:  # the batch was there: only its worker's answer waited
            request = max(request, delivered - (busy >> _HELD_SHIFT))
        if busy & BUSY_AT_REQUEST:  # it finished during the pull: at its stamp, or later
            request = max(request, min(prev_done_ns or delivered, delivered))
        elif not busy & CHECKED and prev_done_ns is not None:
            request = max(request, prev_done_ns)
        total = max(0, delivered - request)
        if len(pulls) == 1:
            return total
        if not mode & OVERLAP:
            return total + sum(max(0, d - r) for r, d in pulls[1:])
        if ends is not None and len(ends) >= len(pulls) - 1:
            # Each step's compute end, stamped in order: step k computed batch k.
            for (r, d), computed in zip(pulls[1:], ends, strict=False):
                total += max(0, d - max(r, computed))
            return total
        compute_ns = self._compute_estimate(phase, pulls, self._done.get(exec_id))
        if compute_ns is None:
            return None
        for (_, previous_delivery), (r, d) in itertools.pairwise(pulls):
            total += max(0, d - max(r, previous_delivery + compute_ns))
        return total

    def _compute_estimate(
        self, phase: str, pulls: list[tuple[int, int]], done_ns: int | None
    ) -> int | None:
        if done_ns is None:
            return self._compute_ns.get(phase)
        last_request, last_delivery = pulls[-1]
        estimate = max(0, min(done_ns - last_delivery, (done_ns - last_request) // 2))
        self._compute_ns[phase] = estimate
        return estimate

    def _forget_stale(self, now_ns: int) -> None:
        # Each table holds its facts in the order they came, near enough that of their times:
        # a sweep stops at the first fresh one, so it reads what it removes and one more. (It
        # read every fact at every delivery: a job of 0.3 ms steps keeps ~33,000 completion
        # stamps of the last 10 s, and delivering a step cost a third more.)
        oldest = now_ns - _STALE_NS
        if len(self._done) > _KEEP:
            _sweep(self._done, lambda _, t: t < oldest)
        if len(self._busy) > _KEEP:
            _sweep(self._busy, lambda key, _: key[1] < oldest)
        if len(self._host_pulls) > _KEEP:
            _sweep(self._host_pulls, lambda _, pulls: pulls[-1][1] < oldest)


def _sweep(table: dict[Any, Any], stale: Callable[[Any, Any], bool]) -> None:
    """Remove `table`'s entries from its first up to the first that is not `stale(key, value)`
    (one out of order waits for those before it to go)."""
    gone = []
    for key, value in table.items():
        if not stale(key, value):
            break
        gone.append(key)
    for key in gone:
        del table[key]


def _take(queue: deque[tuple[int, int]], start_ns: int, end_ns: int) -> list[tuple[int, int]]:
    """The in-graph records of a step from `start_ns` to `end_ns`, out of the sorted `queue`."""
    while queue and queue[0][0] < start_ns:  # before any step: a build-time peek, not a wait
        queue.popleft()
    taken = []
    while queue and queue[0][0] < end_ns:
        taken.append(queue.popleft())
    return taken
