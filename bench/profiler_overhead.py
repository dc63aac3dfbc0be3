"""gpuwhy run beside the profilers people use today, over the same Keras (TensorFlow) steps.

One healthy, compute-bound Keras job (data in memory behind cache().prefetch(), two dense
layers of 1024, CPU here) run five ways, alternated round by round (the order rotates every
round so that drifts in machine load hit all alike):

  bare          the job alone
  gpuwhy        under `python -m gpuwhy run --quiet --record ...` (hooks + sampler)
  gpuwhy-bare   under `gpuwhy run --no-hooks` (sampler and process wrapping only)
  tensorboard   with `keras.callbacks.TensorBoard(profile_batch=(a, b))`
  tf-profiler   with `tf.profiler.experimental.start(logdir)` / `stop()` around batches a..b

Each run reports the time of the profiled batches a..b (measured by two callbacks, the first
and the last, so a profiler's start and stop are inside), of the whole `fit`, and the run's wall
time. Reported: per variant, the median over rounds of its ratio to that round's bare run.
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
VARIANTS = ("bare", "gpuwhy", "gpuwhy-bare", "tensorboard", "tf-profiler")
BATCH = 128


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

    class Clock(tf.keras.callbacks.Callback):
        """Global batch counter; times batches first..last; runs the tf-profiler variant."""

        def __init__(self, role: str) -> None:
            super().__init__()
            self.role = role
            self.batch = -1

        def on_train_batch_begin(self, batch: int, logs: object = None) -> None:
            self.batch += 1
            if self.role == "begin" and self.batch == first:
                marks["begin"] = time.perf_counter()
                if mode == "tf-profiler":
                    tf.profiler.experimental.start(logdir)

        def on_train_batch_end(self, batch: int, logs: object = None) -> None:
            if self.role == "end" and self.batch == last:
                if mode == "tf-profiler":
                    tf.profiler.experimental.stop()
                marks["end"] = time.perf_counter()

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
    callbacks: list[tf.keras.callbacks.Callback] = [Clock("begin")]
    if mode == "tensorboard":  # its batch counter starts at 1: (first + 1, last + 1) = first..last
        callbacks.append(_tensorboard(tf)(log_dir=logdir, profile_batch=(first + 1, last + 1)))
    callbacks.append(Clock("end"))
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
    print(f"fit_s={fit_s:.4f} window_s={marks['end'] - marks['begin']:.4f}", flush=True)


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


def _run(command: list[str]) -> tuple[float, float, float, float]:
    """(wall, fit, window, CPU) seconds of one run; CPU is every process of it, user + system."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    found = re.search(r"fit_s=([0-9.]+) window_s=([0-9.]+)", done.stdout)
    if done.returncode != 0 or found is None:
        raise SystemExit(
            f"run failed ({done.returncode}): {' '.join(command)}\n"
            f"{done.stdout[-1000:]}\n{done.stderr[-3000:]}"
        )
    return wall, float(found.group(1)), float(found.group(2)), cpu


MAX_BATCHES = 10_000  # the data is built in memory: 128 x 256 floats per batch, 1.3 GB here


def _parse(argv: list[str] | None) -> tuple[argparse.Namespace, int, int]:
    """The arguments and the profiled window (first, last); any combination that cannot run is
    rejected here in one line, before minutes of runs rather than after them."""
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
            f"--epochs {args.epochs}: give 2 or more (the profiled window is the second "
            "epoch on; the first holds tracing and warm-up)"
        )
    # The profiled batches: the second epoch and later (the first holds tracing and warm-up).
    trained = args.batches * args.epochs
    first = args.first if args.first is not None else args.batches
    last = args.last if args.last is not None else trained - 1
    if not 0 <= first <= last < trained:
        # Outside the trained batches a clock callback never fires: a KeyError after the runs.
        parser.error(
            f"--first {first} --last {last}: the profiled window must lie within the "
            f"{trained} trained batches (0..{trained - 1}), first <= last"
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

    rows: list[dict[str, tuple[float, float, float, float]]] = []
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
                if variant.startswith("gpuwhy"):
                    record = str(Path(scratch, f"{variant}-{number}.gpuwhy.db"))
                    extra = ["--no-hooks"] if variant == "gpuwhy-bare" else []
                    command = [
                        sys.executable,
                        "-m",
                        "gpuwhy",
                        "run",
                        "--quiet",
                        *extra,
                        "--record",
                        record,
                        "--",
                        *command,
                    ]
                result[variant] = _run(command)
            rows.append(result)
            print(
                f"round {number + 1}/{args.rounds}: "
                + ", ".join(
                    f"{v} {result[v][0]:.1f}/{result[v][1]:.2f}/{result[v][2]:.2f} s"
                    for v in VARIANTS
                ),
                flush=True,
            )

    def ratio(variant: str, index: int) -> float:
        return statistics.median(r[variant][index] / r["bare"][index] for r in rows)

    def median(variant: str, index: int) -> float:
        return statistics.median(r[variant][index] for r in rows)

    steps = last - first + 1
    lines = [
        "# gpuwhy run beside TensorBoard's and TensorFlow's profilers",
        "",
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC} with "
        f"`python bench/profiler_overhead.py --rounds {args.rounds} --batches {args.batches} "
        f"--epochs {args.epochs}` on {machine.describe()}, TensorFlow {tf.__version__} (CPU).",
        "",
        f"Job: Keras on TensorFlow, compute-bound (2 × Dense(1024), batch {BATCH}, data cached "
        f"in memory), {args.epochs} epochs of {args.batches} batches. Profiled window: global "
        f"batches {first}..{last} ({steps} steps); TensorBoard `profile_batch=({first + 1}, "
        f"{last + 1})` and `tf.profiler.experimental.start/stop` cover exactly those. Variants "
        f"alternated in rotating order, {args.rounds} rounds; ratios are medians over rounds of "
        f"(variant / that round's bare run).{tensorboard_note()}",
        "",
        "| variant | window s (median) | window ratio | fit ratio | wall ratio | CPU s "
        "(median) | CPU ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for variant in VARIANTS:
        lines.append(
            f"| {variant} | {median(variant, 2):.3f} | {ratio(variant, 2):.3f} | "
            f"{ratio(variant, 1):.3f} | {ratio(variant, 0):.3f} | "
            f"{median(variant, 3):.1f} | {ratio(variant, 3):.3f} |"
        )
    wall_delta = statistics.median(r["gpuwhy"][0] - r["bare"][0] for r in rows)
    fit_delta = statistics.median(r["gpuwhy"][1] - r["bare"][1] for r in rows)
    hooks_delta = statistics.median(r["gpuwhy"][1] - r["gpuwhy-bare"][1] for r in rows)
    cpu_delta = statistics.median(r["gpuwhy"][3] - r["bare"][3] for r in rows)
    cpu_hooks = statistics.median(r["gpuwhy"][3] - r["gpuwhy-bare"][3] for r in rows)
    bare_windows = [r["bare"][2] for r in rows]
    spread = (max(bare_windows) - min(bare_windows)) / statistics.median(bare_windows)
    lines += [
        "",
        "Where gpuwhy's time goes (medians over rounds, seconds): "
        f"wall +{wall_delta:.2f}, of which inside `fit` +{fit_delta:.2f} (hooks alone, "
        f"gpuwhy vs gpuwhy --no-hooks: {hooks_delta:+.2f}) and outside `fit` "
        f"+{wall_delta - fit_delta:.2f} (gpuwhy's own start-up, the environment probe, "
        "wrapping up the recording and the report).",
        "",
        f"CPU time is steadier than wall time on a shared machine: gpuwhy's runs used "
        f"{cpu_delta:+.1f} CPU s more than bare ones (median), of which the hooks "
        f"{cpu_hooks:+.1f} s; the rest is gpuwhy's own process, its sampler and the "
        "environment probe (a subprocess that imports the job's frameworks once per run). "
        f"Between rounds the bare window time itself varied by {100 * spread:.0f} % here, "
        "so wall-time ratios closer than that are not resolved by this run.",
        "",
        "| round | " + " | ".join(f"{v} wall/fit/window/CPU s" for v in VARIANTS) + " |",
        "|---|" + "---|" * len(VARIANTS),
    ]
    for number, r in enumerate(rows, 1):
        lines.append(
            f"| {number} | "
            + " | ".join(
                f"{r[v][0]:.1f} / {r[v][1]:.2f} / {r[v][2]:.2f} / {r[v][3]:.1f}" for v in VARIANTS
            )
            + " |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
