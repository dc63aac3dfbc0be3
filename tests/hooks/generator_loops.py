"""Plain loops over generators and iterator classes, run by tests/hooks/test_generator_pulls.py
on Python 3.12+ and, for what it does there, on 3.10.

Steps are bounded by `tracker.boundary`, the call a torch optimizer step or a JAX compiled train
step makes (framework_hooks.py, jax_steps.py); the loop's reads are found and timed by
generator_pulls.py through `sys.monitoring` (before 3.12: legacy_reads.py). Prints one JSON
line: the spans the emitter delivered (kind, start, end, steps), the kinds of its events, and
which monitoring tool ids gpuwhy still holds, and the reasons its events give.

    python generator_loops.py SHAPE [READ_MS]
                                        loop | accumulate | list | wrapped | thread | taken |
                                        counted | stepwise | late | class | class-stepwise |
                                        costly | brief | own-profiler | gan | held |
                                        stalled

costly: steps of no sleep, each making a few thousand Python calls (a short step of much host
work); brief: a loop of four steps, which ends before the trial of its watch does (before
Python 3.12); own-profiler: the job sets a profile function of its own in its fourth step;
gan: two optimizer steps on each batch (a GAN's discriminator and generator), and the JSON line
also holds `truth`, the share of the loop's time its reads took, timed by the loop itself;
held: after its loop over the generator, the job trains 20 steps on a batch it holds;
stalled: steps of a few calls, no read waiting, and one stall of 30 ms in the fifth.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterable, Iterator

from gpuwhy.hooks import emitter, generator_pulls, tracker
from gpuwhy.model import Event, Span

READ_S, COMPUTE_S, BATCHES, EPOCHS = 0.005, 0.002, 10, 2
TRUTH: list[float] = []  # the gan shape's own measure of its wait share


def batches(count: int, read_s: float | None = None) -> Iterator[int]:
    for index in range(count):
        time.sleep(READ_S if read_s is None else read_s)  # storage
        yield index


class Batches:
    """An iterator class of batches, as a hand-written loader is: `__next__` reads one."""

    def __init__(self, count: int) -> None:
        self.left = count

    def __iter__(self) -> Batches:
        return self

    def __next__(self) -> int:
        if self.left == 0:
            raise StopIteration
        self.left -= 1
        time.sleep(READ_S)  # storage
        return self.left


def progress(items: Iterable[int], bar: list[int]) -> Iterator[int]:
    """A progress bar's wrapper, as tqdm's `__iter__` is: a generator around the input that
    counts what passed."""
    for item in items:
        bar[0] += 1
        yield item


def optimizer_step(compute_s: float = COMPUTE_S) -> None:
    time.sleep(compute_s)
    tracker.boundary(tracker.clock())


def host_work(calls: int) -> int:
    """A step's host work of `calls` small Python calls (layers, hooks)."""
    return sum(abs(index) for index in range(calls))


def loop(shape: str) -> None:
    if shape == "costly":
        for _ in batches(BATCHES * EPOCHS, 0.0):
            host_work(2000)
            optimizer_step(0.0)
        return
    if shape == "stalled":
        for index, _ in enumerate(batches(BATCHES * EPOCHS * 5, 0.0)):
            host_work(3)
            if index == 4:
                time.sleep(0.03)  # the machine stalls the loop once
            optimizer_step(0.0)
        return
    if shape == "own-profiler":
        for index, _ in enumerate(batches(BATCHES * EPOCHS)):
            if index == 4:
                sys.setprofile(lambda frame, event, arg: None)
            optimizer_step()
        return
    if shape == "gan":
        read_ns = 0
        began = time.perf_counter_ns()
        for _ in range(EPOCHS):
            source = batches(BATCHES)
            while True:
                asked = time.perf_counter_ns()
                if next(source, None) is None:
                    break
                read_ns += time.perf_counter_ns() - asked
                optimizer_step()  # the discriminator's
                optimizer_step()  # the generator's
        TRUTH.append(read_ns / (time.perf_counter_ns() - began))
        return
    if shape == "held":
        for _ in batches(BATCHES):
            optimizer_step()
        for _ in range(20):
            optimizer_step()
        return
    if shape == "brief":
        for _ in batches(4):
            optimizer_step()
        return
    if shape == "late":  # steps before the loop reads anything (warm-up calls of the step)
        for _ in range(6):
            optimizer_step()
    for _ in range(EPOCHS):
        if shape == "accumulate":
            source: Iterable[int] = batches(4 * BATCHES, READ_S / 4)
        elif shape == "list":
            source = list(range(BATCHES))
        elif shape == "wrapped":
            source = progress(batches(BATCHES), [0])
        elif shape.startswith("class"):
            source = Batches(BATCHES)
        else:
            source = batches(BATCHES)
        if shape.endswith("stepwise"):  # a loop of steps that asks for each batch: `next(...)`
            for _ in range(BATCHES):
                next(source)  # type: ignore[call-overload]
                optimizer_step()
            continue
        for index in source:
            if shape != "accumulate" or index % 4 == 3:
                optimizer_step()
            if shape == "counted":  # sums a generator expression after each step: no input
                assert sum(1 for _ in range(3)) == 3


def main() -> None:
    global READ_S
    shape = sys.argv[1]
    if len(sys.argv) > 2:  # each read this long (the default: READ_S)
        READ_S = float(sys.argv[2]) / 1000
    delivered: list[Span] = []
    events: list[Event] = []
    emitter.configure(
        lambda batch: [
            delivered.append(r) if isinstance(r, Span) else events.append(r) for r in batch
        ]
    )
    if shape == "taken":  # another tool (a debugger, a profiler) holds both free ids
        if sys.version_info >= (3, 12):
            for tool in (3, 4):
                sys.monitoring.use_tool_id(tool, "another tool")
        else:  # before 3.12 the search is a profile function: the job's own profiler is on
            sys.setprofile(lambda frame, event, arg: None)
    generator_pulls.install()
    other = None
    if shape == "thread":  # the same generator function, read by a thread that is no loop
        other = threading.Thread(target=lambda: sum(batches(3 * BATCHES, READ_S * 2)))
        other.start()
    loop(shape)
    if other is not None:
        other.join()
    tracker.finalize(tracker.clock())
    emitter.flush(5.0)
    monitoring = getattr(sys, "monitoring", None)
    held = [tool for tool in range(6) if monitoring and monitoring.get_tool(tool) == "gpuwhy"]
    spans = [(s.kind.name, s.start_ns, s.end_ns, s.steps) for s in delivered]
    profiled = sys.getprofile() is not None  # the search's profile function stayed on
    kinds = [event.kind for event in events]
    reasons = [str(event.data.get("reason")) for event in events if "reason" in event.data]
    result = {"spans": sorted(spans, key=lambda s: s[1]), "held": held, "events": kinds}
    result["reasons"] = reasons
    if TRUTH:
        result["truth"] = TRUTH[0]
    print(json.dumps({**result, "profiled": profiled}))


if __name__ == "__main__":
    main()
