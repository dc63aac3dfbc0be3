"""What gpuwhy's hooks cost: each hook per call, and short-step training jobs per step.

Per hook, in-process, with the real hook code: each hook's loop is timed against the same loop
without it, bare and hooked alternated round by round (the order swapped every round), the
median over rounds reported. Hooked means the emitter delivers to a sink that encodes every
record as `gpuwhy run`'s socket does and drops the bytes, and `auto.install({})` has patched
the frameworks (`auto.uninstall()` between rounds). The flusher is held back while a loop is
timed; what it then delivers (attribution and encoding of that loop's records, on gpuwhy's
flusher thread, which shares the GIL with training) is timed on its own as "delivery", in the
batches the flusher sends a job of the fastest steps measured here (~0.1 ms, Keras on JAX):
what its calls emit in one flush interval, 0.2 s. A hook's loop calls it far faster than any
step, and delivered all at once its tens of thousands of records make garbage collection
grow with the batch (a Keras batch's records: 11 µs at once, 1.6 µs with the collector off,
2.6 µs in batches of 400).

Short-step jobs: a Keras `fit` (TensorFlow backend; also the torch and JAX backends unless
--quick) and a PyTorch loop, steps of a few ms, each run bare and with the hooks installed in
the same process, after a warm-up of each, in alternated pairs, at two lengths. A hooked run's
time includes delivering every record it emitted. Reported: the median over pairs of the ratio
hooked / bare (wall and process CPU time), a 95 % bootstrap interval and the range of the wall
ratio, and the difference split into what a step costs (its growth from the short run to the
long one) and what a run costs once (a `fit` set up, its iterator described). Goal: at most
20 µs of gpuwhy per step; at most 1 % on a compute-bound job, 2 % on any job (these short steps
are the worst case).

Each part runs in a child process of its own: one framework per process, Keras's backend fixed
per process, no hook state carried from one part to the next. Results go to
bench/results/hook_cost.md with the machine and the date.

    python bench/hook_cost.py [--pairs 20] [--quick] [--out FILE] [--python312 PYTHON]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import machine
from one_line_args import OneLineParser
from overhead import median_interval

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BATCH = 32
RESULT = "RESULT "  # a child's last stdout line: this, then its JSON
MAX_PAIRS = 1000
# Full / --quick sizes. Calls are per round for pure-Python hooks; framework calls take tens
# of µs, so their loops make a tenth as many.
ROUNDS = {False: 15, True: 3}
CALLS = {False: 50_000, True: 5_000}
# A job runs at two lengths, each a whole `fit` or loop: the difference of their costs over
# the difference of their steps is the cost of a step; what is left is paid once a run.
STEPS = {False: (100, 400), True: (20, 60)}  # (short, long) per run of a job

Loop = Callable[[], None]
Body = Callable[[int], Loop]  # set up for n calls (untimed); returns the loop to time
Job = Callable[[int], Loop]  # a run of n steps (set up for at most the long length)


@dataclass(frozen=True)
class Hook:
    label: str
    bare: Body
    hooked: Body
    calls: int


@dataclass(frozen=True)
class Part:
    child: str
    backend: str | None  # KERAS_BACKEND of the child
    needs: tuple[str, ...]  # modules it imports
    optional: bool  # left out of --quick
    python312: bool = False  # run by --python312 (sys.monitoring), not this interpreter


PARTS = (
    Part("hooks-python", None, (), False),
    Part("hooks-generator", None, (), False, python312=True),
    Part("hooks-loader", None, (), False),
    Part("hooks-torch", None, ("torch",), False),
    Part("hooks-tensorflow", "tensorflow", ("tensorflow", "keras"), False),
    Part("job-torch", None, ("torch",), False),
    Part("job-keras", "tensorflow", ("tensorflow", "keras"), False),
    Part("job-keras", "torch", ("torch", "keras"), True),
    Part("job-keras", "jax", ("jax", "keras"), True),
)


# ------------------------------------------------------------------------ the hook children


def _encode_and_drop(records: Sequence[Any]) -> None:
    """What the socket sink does to each record, without the socket: its spans come as lines
    already (`wire_lines`), the rest it encodes."""
    from gpuwhy.wire import encode

    b"".join(r if isinstance(r, bytes) else encode(r) for r in records)


_encode_and_drop.wire_lines = True  # type: ignore[attr-defined]


def _hooks(on: bool) -> None:
    from gpuwhy.hooks import attribution, auto, emitter

    if on:
        # A fresh attribution: steps an earlier hook's loop left waiting for facts that never
        # come (its batch-end stamps, say) would be swept at every delivery of the next one.
        emitter._attributor = attribution.Attributor()
        emitter.configure(_encode_and_drop)
        auto.install({})
    else:
        auto.uninstall()
        emitter.configure(None)


def _timed_ns(loop: Loop) -> int:
    start = time.perf_counter_ns()
    loop()
    return time.perf_counter_ns() - start


FASTEST_STEP_S = 1e-4  # the job table's fastest steps (Keras on JAX, ~0.09 ms)


def _delivery_ns(calls: int, flush_s: float) -> int:
    """Deliver the held records of `calls` calls as the flusher would for calls
    `FASTEST_STEP_S` apart: one delivery per `flush_s` (its interval), each timed."""
    from gpuwhy.hooks import emitter

    held = list(emitter._buffer)  # the emitter's own queue: the records in emission order
    emitter._buffer.clear()
    per_flush = max(1, int(len(held) / calls * flush_s / FASTEST_STEP_S))
    spent = 0
    for first in range(0, max(len(held), 1), per_flush):
        emitter._buffer.extend(held[first : first + per_flush])
        spent += _timed_ns(lambda: emitter.flush(30.0))
    return spent


def measure_hook(hook: Hook, rounds: int, flush_s: float) -> dict[str, Any]:
    """Median µs per call bare, hooked and delivering; hooked − bare paired per round."""

    per_call: dict[str, list[float]] = {"bare": [], "hooked": [], "delivery": []}
    for number in range(-1, rounds):  # round -1 warms both loops up and is not kept
        for on in (False, True) if number % 2 == 0 else (True, False):
            if not on:
                spent = _timed_ns(hook.bare(hook.calls))
                if number >= 0:
                    per_call["bare"].append(spent / hook.calls / 1e3)
                continue
            _hooks(True)
            spent = _timed_ns(hook.hooked(hook.calls))
            delivery = _delivery_ns(hook.calls, flush_s)
            _hooks(False)
            if number >= 0:
                per_call["hooked"].append(spent / hook.calls / 1e3)
                per_call["delivery"].append(delivery / hook.calls / 1e3)
    diffs = [h - b for h, b in zip(per_call["hooked"], per_call["bare"], strict=True)]
    return {
        "label": hook.label,
        "calls": hook.calls,
        **{f"{key}_us": statistics.median(values) for key, values in per_call.items()},
        "diff_us": statistics.median(diffs),
    }


def _empty(n: int) -> Loop:
    def loop() -> None:
        for _ in range(n):
            pass

    return loop


def python_hooks(calls: int) -> list[Hook]:
    """(a) a Python iterator through `timed_next`, (d) a step's begin and end, (e) a sync."""
    from gpuwhy.hooks import iterators, tracker

    def endless() -> Any:  # a generator: weak-referenceable, like a framework's iterator
        yield from itertools.repeat(None)

    def plain_next(n: int) -> Loop:
        source = endless()

        def loop() -> None:
            for _ in range(n):
                next(source)

        return loop

    def timed_next(n: int) -> Loop:
        source, timed = endless(), iterators.timed_next

        def loop() -> None:
            for _ in range(n):
                timed(next, source)

        return loop

    def step(n: int) -> Loop:
        clock, begin, end = tracker.clock, tracker.begin_step, tracker.end_step

        def loop() -> None:
            for _ in range(n):
                begin(clock())
                end(clock())

        return loop

    def sync(n: int) -> Loop:
        count = tracker.count_sync

        def loop() -> None:
            tracker.begin_step(tracker.clock())  # counted into an open step, as in training
            for _ in range(n):
                count()
            tracker.end_step(tracker.clock())

        return loop

    return [
        Hook("Python iterator `next()` → `iterators.timed_next`", plain_next, timed_next, calls),
        Hook("`tracker.begin_step` + `end_step` (one step)", _empty, step, calls),
        Hook("`tracker.count_sync` (in an open step)", _empty, sync, calls * 2),
    ]


class _Endless:
    """An iterator class (a hand-written loader): `__next__` gives the next item."""

    def __iter__(self) -> _Endless:
        return self

    def __next__(self) -> None:
        return None


def generator_hooks(calls: int) -> list[Hook]:
    """(f) a plain loop over a generator or an iterator class, its steps bounded as a torch
    optimizer step bounds them (`tracker.boundary`), its reads found and timed by
    generator_pulls (Python 3.12+)."""
    from gpuwhy.hooks import generator_pulls, tracker

    def endless() -> Any:
        yield from itertools.repeat(None)

    def reads(source: Callable[[], Any]) -> Body:
        def body(n: int) -> Loop:
            def loop() -> None:
                for _ in itertools.islice(source(), n):
                    pass

            return loop

        return body

    def stepped_reads(source: Callable[[], Any]) -> Body:
        def body(n: int) -> Loop:
            generator_pulls.install()  # undone with the other hooks, by `auto.uninstall()`
            boundary, clock = tracker.boundary, tracker.clock

            def loop() -> None:
                for _ in itertools.islice(source(), n):
                    boundary(clock())

            return loop

        return body

    step = "+ `tracker.boundary` (a plain loop's step, Python 3.12)"
    return [
        Hook(f"a generator's read {step}", reads(endless), stepped_reads(endless), calls),
        Hook(
            f"an iterator class's `__next__` {step}",
            reads(_Endless),
            stepped_reads(_Endless),
            calls,
        ),
    ]


def loader_hooks(calls: int) -> list[Hook]:
    """(g) the same iterator class on this interpreter: before Python 3.12 its reads are timed
    through its own `__next__`, patched (legacy_reads.py); and there the same generator too,
    through a profile function on the loop's thread (legacy_generator.py), kept here whatever
    it costs (its budget lifted): a read and a step under it, the floor of what it costs."""
    version = f"Python {sys.version_info[0]}.{sys.version_info[1]}"
    generator, loader = generator_hooks(calls)
    if sys.version_info >= (3, 12):
        step = f"+ `tracker.boundary` (a plain loop's step, {version}: sys.monitoring)"
        return [replace(loader, label=f"an iterator class's `__next__` {step}")]
    from gpuwhy.hooks import legacy_generator

    legacy_generator.BUDGET = math.inf
    step = f"+ `tracker.boundary` (a plain loop's step, {version}"
    return [
        replace(loader, label=f"an iterator class's `__next__` {step}: its `__next__` patched)"),
        replace(generator, label=f"a generator's read {step}: a profile function kept)"),
    ]


def torch_hooks(calls: int) -> list[Hook]:
    """(b) a DataLoader's `__next__`, batches of one so that the per-batch cost shows."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(1)
    loader = DataLoader(
        TensorDataset(torch.randn(calls, 16), torch.randn(calls)), batch_size=1, num_workers=0
    )

    def pulls(n: int) -> Loop:
        batches = iter(loader)

        def loop() -> None:
            for _ in range(n):
                next(batches)

        return loop

    label = "torch DataLoader batch (TensorDataset, batch_size=1, num_workers=0)"
    return [Hook(label, pulls, pulls, calls)]


def tensorflow_hooks(calls: int) -> list[Hook]:
    """(c) eager tf.data iteration; Keras's batch callbacks; the in-graph tf.data stamps."""
    import keras
    import tensorflow as tf

    from gpuwhy.hooks import keras_hooks, tfdata_wait

    numbers = tf.data.Dataset.range(2**62)

    def eager(n: int) -> Loop:
        pulls = iter(numbers)

        def loop() -> None:
            for _ in range(n):
                next(pulls)

        return loop

    callback = keras_hooks.callback_class(keras.callbacks.Callback)()

    def batch_hooks(n: int) -> Loop:
        callback.on_train_begin()

        def loop() -> None:
            for batch in range(n):
                callback.on_train_batch_begin(batch)
                callback.on_train_batch_end(batch)
            callback.on_train_end()

        return loop

    if not tfdata_wait.install():
        raise SystemExit("tf.data pulls not stamped: TensorFlow's iterator layout changed")

    def in_graph(stamped: bool) -> Body:
        # A batch pulled inside a `tf.function`, as Keras on TensorFlow pulls it; traced plain,
        # or traced under the stamps as Keras's compiled loop is.
        call = tfdata_wait.call_stamping if stamped else _call

        def body(n: int) -> Loop:
            @tf.function
            def pull(iterator: Any) -> Any:
                return iterator.get_next()

            iterator = iter(numbers)
            call(pull, iterator)  # traced here, not in the timing

            def loop() -> None:
                for _ in range(n):
                    call(pull, iterator)

            return loop

        return body

    return [
        Hook("tf.data `Dataset.range` iterated eagerly", eager, eager, calls),
        Hook("Keras callback `on_train_batch_begin` + `_end`", _empty, batch_hooks, calls * 4),
        Hook(
            "tf.data wait stamps: a batch pulled in a `tf.function`, as Keras on TensorFlow",
            in_graph(False),
            in_graph(True),
            max(calls // 10, 50),
        ),
    ]


def _call(function: Callable[..., Any], *args: Any) -> Any:
    return function(*args)


# ------------------------------------------------------------------------- the job children


def _clocked(run: Loop, hooked: bool) -> tuple[float, float]:
    """(wall s, process CPU s) of one run; a hooked run includes delivering its records."""
    from gpuwhy.hooks import emitter

    if hooked:
        _hooks(True)
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    if hooked:
        emitter.flush(30.0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if hooked:
        _hooks(False)
    return wall, cpu


def alternate(job: Job, lengths: Sequence[int], pairs: int) -> list[dict[str, Any]]:
    """Bare and hooked runs of each length in pairs, the order swapped every pair, after one
    of each: per pair and length, (wall s, CPU s) bare and hooked."""
    runs = {steps: job(steps) for steps in lengths}
    for run in runs.values():
        _clocked(run, False), _clocked(run, True)
    rows = []
    for number in range(pairs):
        pair: dict[str, Any] = {}
        for steps, run in runs.items():
            timed = {}
            for hooked in (False, True) if number % 2 == 0 else (True, False):
                timed["hooked" if hooked else "bare"] = _clocked(run, hooked)
            pair[str(steps)] = timed
        rows.append(pair)
    return rows


def torch_job(most: int) -> tuple[str, Job]:
    """A small MLP trained over an in-memory DataLoader, the loss read every 10 steps."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    torch.set_num_threads(1)  # spinning intra-op threads swing step times on a busy machine
    features, labels = torch.randn(most * BATCH, 64), torch.randint(0, 10, (most * BATCH,))
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()

    def job(steps: int) -> Loop:
        n = steps * BATCH  # views of the first n samples: the same dataset type at any length
        loader = DataLoader(TensorDataset(features[:n], labels[:n]), batch_size=BATCH)

        def run() -> None:
            train(loader)

        return run

    def train(loader: Any) -> None:
        for step, (inputs, targets) in enumerate(loader):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
            if step % 10 == 0:
                loss.item()

    return "PyTorch loop (MLP 64-256-10, DataLoader, `.item()` every 10 steps)", job


def keras_job(most: int) -> tuple[str, Job]:
    """A tiny Keras model, one epoch per `fit`: a tf.data dataset on TensorFlow, else arrays."""
    import keras
    import numpy as np

    backend = keras.config.backend()
    if backend == "torch":
        import torch

        torch.set_num_threads(1)  # as in the PyTorch loop
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(most * BATCH, 32)).astype("float32")
    y = rng.normal(size=(most * BATCH, 1)).astype("float32")
    # Bare and hooked runs each train a model of their own, the hooked one compiled under the
    # hooks as `gpuwhy run` compiles every model (on TensorFlow, a Keras loop compiled without
    # them has no in-graph stamps; one compiled with them keeps the stamps when they are gone).
    models = {}
    for hooked in (False, True):
        models[hooked] = keras.Sequential(
            [keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)]
        )
        models[hooked].compile("sgd", "mse")

    def model() -> Any:
        from gpuwhy.hooks import auto

        return models[auto.is_installed()]

    if backend == "tensorflow":
        import tensorflow as tf

        def job(steps: int) -> Loop:
            n = steps * BATCH
            data = tf.data.Dataset.from_tensor_slices((x[:n], y[:n])).batch(BATCH).cache()

            def run() -> None:
                model().fit(data, epochs=1, verbose=0)

            return run

        source = "a cached tf.data dataset"
    else:

        def job(steps: int) -> Loop:
            n = steps * BATCH

            def run() -> None:
                model().fit(x[:n], y[:n], batch_size=BATCH, epochs=1, verbose=0, shuffle=False)

            return run

        source = "NumPy arrays"
    return f"Keras `fit` on {backend} (Dense 64-1, {source})", job


HOOK_CHILDREN: dict[str, Callable[[int], list[Hook]]] = {
    "hooks-python": python_hooks,
    "hooks-generator": generator_hooks,
    "hooks-loader": loader_hooks,
    "hooks-torch": torch_hooks,
    "hooks-tensorflow": tensorflow_hooks,
}
JOB_CHILDREN: dict[str, Callable[[int], tuple[str, Job]]] = {
    "job-torch": torch_job,
    "job-keras": keras_job,
}


def child(name: str, pairs: int, quick: bool) -> dict[str, Any]:
    """One part of the benchmark, in this process."""
    if name in HOOK_CHILDREN:
        from gpuwhy.hooks import emitter

        # Held back while a loop is timed: its records are then delivered as the flusher would.
        flush_s, emitter.FLUSH_INTERVAL_S = emitter.FLUSH_INTERVAL_S, 3600.0
        pure = name in ("hooks-python", "hooks-generator", "hooks-loader")
        calls = CALLS[quick] if pure else CALLS[quick] // 10
        hooks = HOOK_CHILDREN[name](calls)
        return {"hooks": [measure_hook(hook, ROUNDS[quick], flush_s) for hook in hooks]}
    lengths = STEPS[quick]
    label, job = JOB_CHILDREN[name](max(lengths))
    return {"job": {"label": label, "steps": lengths, "pairs": alternate(job, lengths, pairs)}}


# ------------------------------------------------------------------------------- the parent


def child_env(backend: str | None) -> dict[str, str]:
    """The environment of a child that installs the hooks itself, Keras on `backend`."""
    env = dict(os.environ)
    env.pop("GPUWHY_SOCKET", None)  # not a job under `gpuwhy run`, even if this bench is
    env["GPUWHY_BOOT"] = "0"  # no start-up hook: the child installs the hooks itself
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if backend:
        env["KERAS_BACKEND"] = backend
    return env


def _run_part(part: Part, args: argparse.Namespace) -> dict[str, Any]:
    """Run one part in a child process and return what it measured; exits if it fails."""
    pairs, quick = args.pairs, args.quick
    env = child_env(part.backend)
    python = sys.executable
    if part.python312:  # this gpuwhy, whatever that interpreter has installed
        python = str(args.python312)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")])
        )
    command = [python, str(Path(__file__).resolve()), "--child", part.child]
    command += ["--pairs", str(pairs), *(["--quick"] if quick else [])]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode != 0 or not lines:
        raise SystemExit(
            f"{part.child} ({part.backend or 'no Keras'}) failed ({done.returncode}):\n"
            f"{done.stdout[-1000:]}\n{done.stderr[-3000:]}"
        )
    return json.loads(lines[-1][len(RESULT) :])


def _missing(part: Part) -> str | None:
    for module in part.needs:
        if importlib.util.find_spec(module) is None:
            return module
    return None


def hook_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| hook | calls per round | bare µs | hooked µs | hooked − bare µs | delivery µs | "
        "hooked − bare + delivery µs |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        total = row["diff_us"] + row["delivery_us"]
        lines.append(
            f"| {row['label']} | {row['calls']} | {row['bare_us']:.3f} | {row['hooked_us']:.3f} "
            f"| {row['diff_us']:.3f} | {row['delivery_us']:.3f} | {total:.3f} |"
        )
    return lines


def job_table(jobs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| job | steps per short run | steps per long run | pairs | bare ms per step | "
        "median ratio (hooked / bare), long run | 95 % interval | min – max | CPU ratio (median) | "
        "hooked − bare µs per step, all in (long run) | hooked − bare µs per step | "
        "hooked − bare ms once per run |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for job in jobs:
        short, long = job["steps"]
        pairs = job["pairs"]
        longs = [pair[str(long)] for pair in pairs]
        walls = [p["hooked"][0] / p["bare"][0] for p in longs]
        cpus = [p["hooked"][1] / p["bare"][1] for p in longs]
        all_in = [(p["hooked"][0] - p["bare"][0]) / long * 1e6 for p in longs]
        per_step, once = step_and_run_costs(pairs, short, long)
        bare_ms = statistics.median(p["bare"][0] for p in longs) / long * 1e3
        low, high = median_interval(walls)
        lines.append(
            f"| {job['label']} | {short} | {long} | {len(pairs)} | {bare_ms:.3f} | "
            f"{statistics.median(walls):.3f} | {low:.3f} – {high:.3f} | "
            f"{min(walls):.3f} – {max(walls):.3f} | {statistics.median(cpus):.3f} | "
            f"{statistics.median(all_in):.1f} | {statistics.median(per_step):.1f} | "
            f"{statistics.median(once):.2f} |"
        )
    return lines


def step_and_run_costs(
    pairs: Sequence[dict[str, Any]], short: int, long: int
) -> tuple[list[float], list[float]]:
    """Per pair, what the hooks add per step (µs: the extra cost's growth from the short run to
    the long one, per step) and once per run (ms: the short run's extra cost less its steps')."""
    per_step, once = [], []
    for pair in pairs:
        extra = {
            steps: pair[str(steps)]["hooked"][0] - pair[str(steps)]["bare"][0]
            for steps in (short, long)
        }
        step_s = (extra[long] - extra[short]) / (long - short)
        per_step.append(step_s * 1e6)
        once.append((extra[short] - step_s * short) * 1e3)
    return per_step, once


def document(
    args: argparse.Namespace, hooks: list[str], jobs: list[str], notes: list[str], load: str
) -> str:
    rounds = ROUNDS[args.quick]
    command = f"python bench/hook_cost.py --pairs {args.pairs}{' --quick' if args.quick else ''}"
    frameworks = ", ".join(
        f"{name} {v}"
        for name in ("tensorflow", "keras", "torch", "jax")
        if (v := machine.version(name))
    )
    lines = [
        "# Cost of gpuwhy's hooks, per call and per step",
        "",
        f"- Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {machine.describe()}; {frameworks or 'no frameworks'}",
        f"- Command: `{command}`",
        f"- Load average (1 min) before / after: {load} (other processes on the machine add "
        "noise to single rounds and pairs; the medians resist it).",
        "- Goal: at most 20 µs of gpuwhy per step; at most 1 % on a compute-bound job, 2 % on "
        "any job.",
        *[f"- {note}" for note in notes],
        "",
        "## Per hook call",
        "",
        f"Each hook's loop against the same loop without it, {rounds} rounds alternated (one "
        "warm-up round first), median µs per call; hooked − bare is the median of the per-round "
        "differences. Hooked: `auto.install({})` and the emitter delivering to a sink that "
        "encodes each record as `gpuwhy run`'s socket does. Delivery: the attribution and "
        "encoding of those records on gpuwhy's flusher thread (held back during the loop, then "
        "timed), per call, delivered in the batches one flush interval holds for calls "
        f"{FASTEST_STEP_S * 1e3:g} ms apart (the fastest steps of the jobs below; a hook's "
        "loop calls far faster, and one delivery of all its records makes garbage collection "
        "grow with the batch); each round of each hook starts from a fresh attribution. Bare "
        "loops without a counterpart (a step, a sync, Keras's batch hooks) are empty loops.",
        "",
        *hooks,
        "",
        "## Short-step jobs, hooks installed in the same process",
        "",
        "Each run one epoch, at two lengths; bare and hooked runs of each length alternated in "
        "pairs (order swapped every pair) after a warm-up of each. Ratios, of the long runs: "
        "medians over pairs of hooked / bare, wall time (with a 95 % bootstrap interval of the "
        "median, 2000 resamples of the pairs) and process CPU time; a hooked run's time "
        "includes delivering all its records. hooked − bare per step, all in: the long run's "
        "wall-time difference over its steps, so what is paid once a run (an iterator made, a "
        "loop set up, Keras's train function watched) is spread over them. hooked − bare per "
        "step: how much the difference grows from the short run to the long one, per step; "
        "once per run: the short run's difference less its steps' (medians over pairs). The "
        "goal of 20 µs is of the step.",
        "",
        *jobs,
    ]
    return "\n".join(lines) + "\n"


def parent(args: argparse.Namespace) -> int:
    load_before = os.getloadavg()[0]
    hook_rows: list[dict[str, Any]] = []
    jobs: list[dict[str, Any]] = []
    notes = []
    for part in PARTS:
        name = f"{part.child}{f' ({part.backend})' if part.backend else ''}"
        if part.optional and args.quick:
            continue
        missing = _missing(part)
        if missing:
            notes.append(f"{name} not run: {missing} is not installed.")
            continue
        if part.python312 and args.python312 is None:
            notes.append(f"{name} not run: no Python 3.12 (give --python312).")
            continue
        print(f"== {name}", flush=True)
        found = _run_part(part, args)
        hook_rows += found.get("hooks", [])
        jobs += [found["job"]] if "job" in found else []
    if args.quick:
        notes.append("Quick run: fewer calls, rounds, steps and pairs; no Keras on torch or JAX.")
    hooks, job_lines = hook_table(hook_rows), job_table(jobs)
    load = f"{load_before:.2f} / {os.getloadavg()[0]:.2f}"
    text = document(args, hooks, job_lines, notes, load)
    print("\n".join(["", *hooks, "", *job_lines]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"-> {args.out}")
    return 0


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, help="bare/hooked pairs per job (20; --quick: 3)")
    parser.add_argument("--quick", action="store_true", help="a short run, to check it works")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "hook_cost.md")
    parser.add_argument(
        "--python312",
        type=Path,
        default=machine.PY312 if machine.PY312.exists() else None,
        help="a Python 3.12 for the generator reads' hook "
        f"(default {machine.PY312.relative_to(ROOT)})",
    )
    parser.add_argument("--child", choices=[*HOOK_CHILDREN, *JOB_CHILDREN], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.pairs is None:
        args.pairs = 3 if args.quick else 20
    if not 1 <= args.pairs <= MAX_PAIRS:
        parser.error(f"--pairs {args.pairs}: give 1 to {MAX_PAIRS}")
    if args.child is None and args.out.is_dir():
        parser.error(f"--out {args.out} is a folder: give a file name")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.child is None:
        return parent(args)
    print(RESULT + json.dumps(child(args.child, args.pairs, args.quick)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
