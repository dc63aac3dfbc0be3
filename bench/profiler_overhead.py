"""gpuwhy run beside the profilers people use today, over the same Keras (TensorFlow) steps.

One healthy, compute-bound Keras job (data in memory behind cache().prefetch(), two dense
layers of 1024, CPU here) run six ways, alternated round by round (the order rotates every
round so that drifts in machine load hit all alike):

  bare            the job alone
  gpuwhy          under `python -m gpuwhy run --quiet --record ...` (hooks + sampler)
  gpuwhy-bare     under `gpuwhy run --no-hooks` (sampler and process wrapping only)
  gpuwhy-profile  under `gpuwhy run --profile S`, its window on batches a..b (below)
  tensorboard     with `keras.callbacks.TensorBoard(profile_batch=(a, b))`
  tf-profiler     with `tf.profiler.experimental.start(logdir)` / `stop()` around batches a..b

The profiled batches a..b are where `gpuwhy run --profile S` puts its window, since it cannot be
moved: it skips the first PROFILE_SKIP (10) batches, so a = 10 starts the profiler (its warm-up
batch), batches a+1..a+S are profiled and batch b = a+S+1's begin stops it. By default b is the
first epoch's last batch (S = 48 at 60 batches an epoch): the window holds no validation pass,
and the later epochs are all outside it.

Each run reports, from one callback last in the job's list: the time of batches a..b, from the
end of batch a-1 (after every callback's hooks) to the end of batch b, so every profiler's
start and stop (gpuwhy's run in batch hooks ahead of the job's own) is inside; the time of the
batches outside the window, each counted the same way, batch 0 left out (it traces and builds
the train step: a one-off that swings by more than the rest together); the whole `fit`; and
the run's wall time. Reported: per variant, the median over rounds of its ratio to that round's
bare run; for gpuwhy-profile also its outside batches over plain gpuwhy's (the overhead of
`--profile` outside its window) and its window over tf-profiler's.
Writes bench/results/profiler_overhead.md.

    python bench/profiler_overhead.py [--rounds 4] [--batches 60] [--epochs 3]
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import machine
from one_line_args import OneLineParser

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VARIANTS = ("bare", "gpuwhy", "gpuwhy-bare", "gpuwhy-profile", "tensorboard", "tf-profiler")
BATCH = 128
# wall, fit, window, CPU, outside seconds and the median batch outside the window
Run = tuple[float, float, float, float, float, float]
WALL, FIT, WINDOW, CPU, OUTSIDE, OUTSIDE_P50 = range(6)


def job(mode: str, batches: int, epochs: int, first: int, last: int, logdir: str) -> None:
    """The training job itself (run in a child process)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)

    def dataset(count: int) -> tf.data.Dataset:
        x = rng.normal(size=(count * BATCH, 256)).astype("float32")
        y = rng.integers(0, 10, size=(count * BATCH,)).astype("int64")
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).cache().prefetch(2)

    marks: dict[str, float] = {}
    batch_s: dict[int, float] = {}  # global batch -> its time

    class Clock(tf.keras.callbacks.Callback):
        """Last in the list: a batch's time runs from this callback's previous hook (the batch
        before's end, or the epoch's begin) to its end hook for the batch, so every callback's
        hooks for it are inside, gpuwhy's (inserted first) included. Runs the tf-profiler."""

        def __init__(self) -> None:
            super().__init__()
            self.batch = -1
            self.ready = 0.0

        def on_epoch_begin(self, epoch: int, logs: object = None) -> None:
            self.ready = time.perf_counter()  # validation and epoch hooks are no batch's

        def on_train_batch_begin(self, batch: int, logs: object = None) -> None:
            self.batch += 1
            if self.batch == first:
                marks["begin"] = self.ready
                if mode == "tf-profiler":
                    tf.profiler.experimental.start(logdir)

        def on_train_batch_end(self, batch: int, logs: object = None) -> None:
            if self.batch == last and mode == "tf-profiler":
                tf.profiler.experimental.stop()
            now = time.perf_counter()
            batch_s[self.batch] = now - self.ready
            if self.batch == last:
                marks["end"] = now
            self.ready = now

    model = tf.keras.Sequential(
        [
            tf.keras.Input((256,)),
            tf.keras.layers.Dense(1024, activation="relu"),
            tf.keras.layers.Dense(1024, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    callbacks: list[tf.keras.callbacks.Callback] = []
    if mode == "tensorboard":  # its batch counter starts at 1: (first + 1, last + 1) = first..last
        callbacks.append(_tensorboard(tf)(log_dir=logdir, profile_batch=(first + 1, last + 1)))
    callbacks.append(Clock())
    train = dataset(batches)
    validation = dataset(max(batches // 10, 1))
    start = time.perf_counter()
    model.fit(
        train,
        validation_data=validation,
        epochs=epochs,
        verbose=0,
        shuffle=False,
        callbacks=callbacks,
    )
    fit_s = time.perf_counter() - start
    if len(marks) < 2:  # main() checks the window; this guards a Keras that skips callbacks
        raise SystemExit(f"the profiled window {first}..{last} was not reached in training")
    outside = [s for number, s in batch_s.items() if number and not first <= number <= last]
    print(
        f"fit_s={fit_s:.4f} window_s={marks['end'] - marks['begin']:.4f} "
        f"outside_s={sum(outside):.4f} outside_p50_s={statistics.median(outside):.6f}",
        flush=True,
    )


def _tensorboard(tf: object) -> type:
    """Keras' TensorBoard callback; without the `tensorboard` package (TensorFlow does not
    require it), the same callback with its epoch scalars off: tf.summary.scalar needs that
    package, while the profiling path (summary.trace_on/trace_export, the profiler) is
    TensorFlow's own and runs unchanged."""
    callback: type = tf.keras.callbacks.TensorBoard  # type: ignore[attr-defined]
    try:
        import tensorboard  # noqa: F401
    except ImportError:

        class NoScalars:
            """tf.summary, with scalar() a no-op (with update_freq="epoch", the default, the
            callback's per-batch scalars are not recorded anyway)."""

            def __init__(self, summary: object) -> None:
                self._summary = summary

            def __getattr__(self, name: str) -> object:
                return getattr(self._summary, name)

            def scalar(self, *args: object, **kwargs: object) -> bool:
                return False

        class ProfileOnly(callback):  # type: ignore[misc, valid-type]
            @property
            def summary(self) -> object:
                return NoScalars(super().summary)

        return ProfileOnly
    return callback


def tensorboard_note() -> str:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return (
            " The `tensorboard` package is not installed here, so the TensorBoard variant "
            "runs with its epoch scalars off (they need that package); its profiling path "
            "is unchanged."
        )
    return ""


def _run(command: list[str]) -> Run:
    """(wall, fit, window, CPU, outside, median batch outside) seconds of one run; CPU is every
    process of it, user + system."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    found = re.search(
        r"fit_s=([0-9.]+) window_s=([0-9.]+) outside_s=([0-9.]+) outside_p50_s=([0-9.]+)",
        done.stdout,
    )
    if done.returncode != 0 or found is None:
        raise SystemExit(
            f"run failed ({done.returncode}): {' '.join(command)}\n"
            f"{done.stdout[-1000:]}\n{done.stderr[-3000:]}"
        )
    fit, window, outside, outside_p50 = (float(value) for value in found.groups())
    return wall, fit, window, cpu, outside, outside_p50


def _window(record: Path) -> dict[str, object]:
    """What gpuwhy itself measured and prints of its window (`gpuwhy report`'s figures): raises
    when no window was written, or not over the steps asked."""
    from gpuwhy.analysis.kernels.window import window_cost
    from gpuwhy.cli.report import profile_directory, window_written
    from gpuwhy.model import SpanKind
    from gpuwhy.recording.reader import Recording

    if not window_written(profile_directory(record)):
        raise SystemExit(f"gpuwhy run --profile wrote no trace beside {record}")
    with Recording.open(record) as recording:
        cost = window_cost(recording.events(), recording.spans(SpanKind.STEP))
    if cost is None or cost["steps"] != cost["steps_asked"]:
        raise SystemExit(f"gpuwhy run --profile: window not over the steps asked: {cost}")
    return cost


MAX_BATCHES = 10_000  # the data is built in memory: 128 x 256 floats per batch, 1.3 GB here


def _parse(argv: list[str] | None) -> tuple[argparse.Namespace, int, int]:
    """The arguments and the profiled window (first, last); any combination that cannot run is
    rejected here in one line, before minutes of runs rather than after them."""
    from gpuwhy.cli.run import MAX_PROFILE_STEPS, PROFILE_SKIP

    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batches", type=int, default=60, help="training batches per epoch")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "profiler_overhead.md")
    parser.add_argument(
        "--job", choices=("bare", "tensorboard", "tf-profiler"), help=argparse.SUPPRESS
    )
    parser.add_argument("--first", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--last", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--logdir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: give 1 or more (the medians need a round)")
    if not 1 <= args.batches <= MAX_BATCHES:
        parser.error(
            f"--batches {args.batches}: give 1 to {MAX_BATCHES} (the data is built in memory)"
        )
    if args.epochs < 2:
        parser.error(
            f"--epochs {args.epochs}: give 2 or more (the epochs after the window's are the "
            "batches outside it)"
        )
    # The profiled batches: where `gpuwhy run --profile` opens its window (after its warm-up
    # batches, which it does not let one move), to the end of the epoch holding batch first + 2
    # (--profile's one step at least): no validation pass inside.
    trained = args.batches * args.epochs
    first = args.first if args.first is not None else PROFILE_SKIP
    if args.last is not None:
        last = args.last
    else:  # at most the steps --profile takes
        last = min(-(-(first + 3) // args.batches) * args.batches, first + 2 + MAX_PROFILE_STEPS)
        last -= 1
    if first != PROFILE_SKIP:
        parser.error(
            f"--first {first}: gpuwhy run --profile starts its window at batch {PROFILE_SKIP} "
            "(after its warm-up batches), so the other profilers' must too"
        )
    if not first + 2 <= last <= first + 1 + MAX_PROFILE_STEPS or last >= trained:
        # Outside the trained batches a clock callback never fires: a KeyError after the runs.
        parser.error(
            f"--first {first} --last {last}: the profiled window must lie within the "
            f"{trained} trained batches (0..{trained - 1}) and hold 1 to {MAX_PROFILE_STEPS} "
            "steps of gpuwhy run --profile (first + 2 <= last <= first + "
            f"{MAX_PROFILE_STEPS + 1})"
        )
    if args.job is not None and not args.logdir:
        parser.error("--job needs --logdir (where the profilers write)")
    if args.job is None:
        _check_output(parser, args.out)
    return args, first, last


def _check_output(parser: argparse.ArgumentParser, out: Path) -> None:
    """The results file can be written: checked now, not after the runs."""
    if out.is_dir():
        parser.error(f"--out {out} is a folder: give a file name")
    folder = out.parent
    while not folder.exists():  # created at the end; its nearest existing ancestor decides
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        parser.error(f"--out {out}: cannot create it under {folder}: choose a writable folder")


def main(argv: list[str] | None = None) -> int:
    args, first, last = _parse(argv)
    if args.job:
        job(args.job, args.batches, args.epochs, first, last, args.logdir)
        return 0
    import tensorflow as tf  # fail early; its version goes in the table

    rows: list[dict[str, Run]] = []
    windows: list[dict[str, object]] = []  # gpuwhy-profile's own figures, per round
    profiled = last - first - 1  # --profile S: a warms the profiler up, b's begin stops it
    load_before = machine.load()  # a shared machine's other work moves every ratio
    with tempfile.TemporaryDirectory() as scratch:
        for number in range(args.rounds):
            order = VARIANTS[number % len(VARIANTS) :] + VARIANTS[: number % len(VARIANTS)]
            result = {}
            for variant in order:
                logdir = str(Path(scratch, f"{variant}-{number}"))
                mode = variant if variant in ("tensorboard", "tf-profiler") else "bare"
                command = [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--job",
                    mode,
                    "--batches",
                    str(args.batches),
                    "--epochs",
                    str(args.epochs),
                    "--first",
                    str(first),
                    "--last",
                    str(last),
                    "--logdir",
                    logdir,
                ]
                record = Path(scratch, f"{variant}-{number}.gpuwhy.db")
                if variant.startswith("gpuwhy"):
                    extra = {
                        "gpuwhy-bare": ["--no-hooks"],
                        "gpuwhy-profile": ["--profile", str(profiled)],
                    }.get(variant, [])
                    command = [
                        sys.executable,
                        "-m",
                        "gpuwhy",
                        "run",
                        "--quiet",
                        *extra,
                        "--record",
                        str(record),
                        "--",
                        *command,
                    ]
                result[variant] = _run(command)
                if variant == "gpuwhy-profile":
                    windows.append(_window(record))
            rows.append(result)
            print(
                f"round {number + 1}/{args.rounds}: "
                + ", ".join(
                    f"{v} {result[v][WALL]:.1f}/{result[v][FIT]:.2f}/{result[v][WINDOW]:.2f}"
                    f"/{result[v][OUTSIDE]:.2f} s"
                    for v in VARIANTS
                ),
                flush=True,
            )

    def ratio(variant: str, index: int, over: str = "bare") -> float:
        return statistics.median(r[variant][index] / r[over][index] for r in rows)

    def median(variant: str, index: int) -> float:
        return statistics.median(r[variant][index] for r in rows)

    def spread(variant: str, index: int, over: str) -> str:
        """Median and range over rounds of variant / over (same round)."""
        ratios = [r[variant][index] / r[over][index] for r in rows]
        return f"{statistics.median(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f})"

    def figure(key: str) -> str:
        """Median and range over rounds of a figure gpuwhy printed for its window."""
        values = [float(w[key]) for w in windows]  # type: ignore[arg-type]
        return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"

    load_after = machine.load()
    steps = last - first + 1
    trained = args.batches * args.epochs
    outside_steps = trained - 1 - steps  # batch 0 left out
    bench_ratio = statistics.median(
        (r["gpuwhy-profile"][WINDOW] / steps) / (r["gpuwhy-profile"][OUTSIDE] / outside_steps)
        for r in rows
    )
    lines = [
        "# gpuwhy run beside TensorBoard's and TensorFlow's profilers",
        "",
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC} with "
        f"`python bench/profiler_overhead.py --rounds {args.rounds} --batches {args.batches} "
        f"--epochs {args.epochs}` on {machine.describe()}, TensorFlow {tf.__version__} (CPU); "
        f"load average (1 / 5 / 15 min) before {load_before}, after {load_after}.",
        "",
        f"Job: Keras on TensorFlow, compute-bound (2 × Dense(1024), batch {BATCH}, data cached "
        f"in memory), {args.epochs} epochs of {args.batches} batches. Profiled window: global "
        f"batches {first}..{last} ({steps} batches), where `gpuwhy run --profile {profiled}` "
        f"puts its window (it skips the first {first} batches: batch {first} starts its "
        f"profiler and warms it up, {first + 1}..{last - 1} are profiled, batch {last}'s begin "
        f"stops it); TensorBoard `profile_batch=({first + 1}, {last + 1})` and "
        "`tf.profiler.experimental.start/stop` cover the same batches. A window's time runs "
        f"from the end of batch {first - 1} to the end of batch {last}, so each profiler's "
        f"start and stop are in it; outside: the other {outside_steps} batches, each timed the "
        "same way (batch 0, which traces and builds the train step, left out). Variants "
        f"alternated in rotating order, {args.rounds} round{'s' * (args.rounds > 1)}; ratios "
        f"are medians over rounds of (variant / that round's bare run).{tensorboard_note()}",
        "",
        "| variant | window s (median) | window ratio | outside s (median) | outside ratio | "
        "fit ratio | wall ratio | CPU s (median) | CPU ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for variant in VARIANTS:
        lines.append(
            f"| {variant} | {median(variant, WINDOW):.3f} | {ratio(variant, WINDOW):.3f} | "
            f"{median(variant, OUTSIDE):.3f} | {ratio(variant, OUTSIDE):.3f} | "
            f"{ratio(variant, FIT):.3f} | {ratio(variant, WALL):.3f} | "
            f"{median(variant, CPU):.1f} | {ratio(variant, CPU):.3f} |"
        )
    lines += [
        "",
        "`gpuwhy run --profile` against the same job under plain `gpuwhy run` (medians over "
        "rounds of the per-round ratio, range over rounds in brackets):",
        "",
        "- outside the window (gpuwhy-profile / gpuwhy), the batches' total time "
        f"{spread('gpuwhy-profile', OUTSIDE, 'gpuwhy')}, their median batch "
        f"{spread('gpuwhy-profile', OUTSIDE_P50, 'gpuwhy')} (a median batch is not moved by "
        "the bursts of other work that move a total); for scale, TensorFlow's profiler "
        "started and stopped by hand, its batches outside over bare's: total "
        f"{spread('tf-profiler', OUTSIDE, 'bare')}, median batch "
        f"{spread('tf-profiler', OUTSIDE_P50, 'bare')};",
        "- inside the window, the profiler's own cost: gpuwhy-profile / gpuwhy "
        f"{spread('gpuwhy-profile', WINDOW, 'gpuwhy')}, tf-profiler / bare "
        f"{spread('tf-profiler', WINDOW, 'bare')}; the windows side by side, gpuwhy-profile / "
        f"tf-profiler {spread('gpuwhy-profile', WINDOW, 'tf-profiler')} (gpuwhy's window also "
        f"holds its hooks and a step marker a batch, and profiles {last - first} of the "
        f"{steps} batches: batch {last} runs after its stop);",
        f"- what gpuwhy printed for its window: {windows[0]['steps']} steps profiled, a step "
        f"inside over a step outside {figure('inside_over_outside')} (medians of its own step "
        f"spans; the bench's mean batch inside over outside, same runs: {bench_ratio:.2f}), "
        f"writing the trace paused the job {figure('export_s')} s.",
    ]
    wall_delta = statistics.median(r["gpuwhy"][WALL] - r["bare"][WALL] for r in rows)
    fit_delta = statistics.median(r["gpuwhy"][FIT] - r["bare"][FIT] for r in rows)
    hooks_delta = statistics.median(r["gpuwhy"][FIT] - r["gpuwhy-bare"][FIT] for r in rows)
    cpu_delta = statistics.median(r["gpuwhy"][CPU] - r["bare"][CPU] for r in rows)
    cpu_hooks = statistics.median(r["gpuwhy"][CPU] - r["gpuwhy-bare"][CPU] for r in rows)

    def varied(index: int) -> float:
        values = [r["bare"][index] for r in rows]
        return 100 * (max(values) - min(values)) / statistics.median(values)

    lines += [
        "",
        "Where gpuwhy's time goes (medians over rounds, seconds): "
        f"wall {wall_delta:+.2f}, of which inside `fit` {fit_delta:+.2f} (hooks alone, "
        f"gpuwhy vs gpuwhy --no-hooks: {hooks_delta:+.2f}) and outside `fit` "
        f"{wall_delta - fit_delta:+.2f} (gpuwhy's own start-up, the environment probe, "
        "wrapping up the recording and the report).",
        "",
        f"CPU time is steadier than wall time on a shared machine: gpuwhy's runs used "
        f"{cpu_delta:+.1f} CPU s more than bare ones (median), of which the hooks "
        f"{cpu_hooks:+.1f} s; the rest is gpuwhy's own process, its sampler and the "
        "environment probe (a subprocess that imports the job's frameworks once per run). "
        f"Between rounds the bare window time itself varied by {varied(WINDOW):.0f} % here "
        f"and the bare outside time by {varied(OUTSIDE):.0f} %, so wall-time ratios closer "
        "than that are not resolved by this run.",
        "",
        "| round | " + " | ".join(f"{v} wall/fit/window/outside/CPU s" for v in VARIANTS) + " |",
        "|---|" + "---|" * len(VARIANTS),
    ]
    for number, r in enumerate(rows, 1):
        lines.append(
            f"| {number} | "
            + " | ".join(
                f"{r[v][WALL]:.1f} / {r[v][FIT]:.2f} / {r[v][WINDOW]:.2f} / "
                f"{r[v][OUTSIDE]:.2f} / {r[v][CPU]:.1f}"
                for v in VARIANTS
            )
            + " |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
