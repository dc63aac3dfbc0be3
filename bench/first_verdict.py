"""Time to first verdict: how soon gpuwhy can name the bottleneck of a slow-input Keras job.

Runs an input-bound Keras (TensorFlow) job under `python -m gpuwhy run --record REC`: its
tf.data pipeline is fed by a Python generator that spends 40 ms on every batch, while the step
itself takes a few ms, so most of every step is spent waiting for data. While the job runs, the
benchmark opens the live recording every second (it is readable while written) and runs
`gpuwhy.analysis.diagnose` on it, until the most valuable finding is INPUT_BOUND. Reported:
seconds from launching `gpuwhy run` and from the recording's start, and training steps recorded
by then, and the training phase's data-wait share at that verdict against the share of the
finished run: the first verdict must be as right as the final one (within 0.05). Goal: within
30 s or 50 steps. Writes bench/results/first_verdict.md.

    python bench/first_verdict.py [--batches 100] [--epochs 3] [--load-ms 40]
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import machine

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXPECTED = "INPUT_BOUND"


def job(batches: int, epochs: int, load_ms: float) -> None:
    """The slow-input training job (run in a child process, under gpuwhy run)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 64)).astype("float32")
    y = rng.integers(0, 10, size=(32,)).astype("int64")

    def slow_batches():  # type: ignore[no-untyped-def]
        while True:
            time.sleep(load_ms / 1000)  # decoding, augmenting... in Python, one batch at a time
            yield x, y

    signature = (tf.TensorSpec((32, 64), tf.float32), tf.TensorSpec((32,), tf.int64))
    data = tf.data.Dataset.from_generator(slow_batches, output_signature=signature)
    model = tf.keras.Sequential(
        [tf.keras.Input((64,)), tf.keras.layers.Dense(64, "relu"), tf.keras.layers.Dense(10)]
    )
    model.compile(
        optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    model.fit(data, steps_per_epoch=batches, epochs=epochs, verbose=0)


def probe(record: Path) -> tuple[str | None, int, int | None, float, float | None]:
    """(top finding code, training steps recorded, recording start ns, analysis seconds,
    the training phase's data-wait share)."""
    from gpuwhy.analysis import diagnose
    from gpuwhy.errors import RecordingError
    from gpuwhy.model import SpanKind
    from gpuwhy.recording import Recording

    started = time.perf_counter()
    try:
        with Recording.open(record) as recording:
            diagnosis = diagnose(recording)
            steps = sum(s.steps for s in recording.spans(kind=SpanKind.STEP, phase="train"))
            start_ns = recording.meta.get("start_ns")
    except RecordingError:
        return None, 0, None, time.perf_counter() - started, None
    top = diagnosis.findings[0].code if diagnosis.findings else None
    train = diagnosis.phases.get("train")
    return (
        top,
        steps,
        start_ns if isinstance(start_ns, int) else None,
        time.perf_counter() - started,
        train.data_wait_fraction if train else None,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=100, help="steps per epoch")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--load-ms", type=float, default=40.0, help="input time per batch")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "first_verdict.md")
    parser.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.job:
        job(args.batches, args.epochs, args.load_ms)
        return 0
    timeline: list[tuple[float, str | None, int, float, float | None]] = []
    found: tuple[float, float | None, int, float, float | None] | None = None
    final_share: float | None = None
    with tempfile.TemporaryDirectory() as scratch:
        record = Path(scratch, "live.gpuwhy.db")
        command = [
            sys.executable,
            "-m",
            "gpuwhy",
            "run",
            "--quiet",
            "--record",
            str(record),
            "--",
            sys.executable,
            str(Path(__file__).resolve()),
            "--job",
            "--batches",
            str(args.batches),
            "--epochs",
            str(args.epochs),
            "--load-ms",
            str(args.load_ms),
        ]
        launched_ns = time.monotonic_ns()
        child = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        while child.poll() is None:
            time.sleep(1.0)
            if not record.exists():
                continue
            probed_ns = time.monotonic_ns()
            top, steps, start_ns, cost, share = probe(record)
            since_launch = (probed_ns - launched_ns) / 1e9
            timeline.append((since_launch, top, steps, cost, share))
            print(
                f"{since_launch:6.1f} s: {steps:4d} steps, top finding {top}, train wait "
                f"{_share(share)} (analysis {cost:.2f} s)",
                flush=True,
            )
            if top == EXPECTED and found is None:
                since_start = None if start_ns is None else (probed_ns - start_ns) / 1e9
                found = (since_launch, since_start, steps, cost, share)
        # The job runs to its end: the finished run's share is what the first verdict is
        # checked against.
        _, errors = child.communicate(timeout=120)
        if child.returncode != 0:
            raise SystemExit(f"the job failed ({child.returncode}): {errors[-3000:]}")
        final_share = probe(record)[4]
    lines = [
        "# Time to first verdict",
        "",
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC} with "
        f"`python bench/first_verdict.py --batches {args.batches} --epochs {args.epochs} "
        f"--load-ms {args.load_ms:g}` on {machine.describe()}.",
        "",
        f"Job: Keras on TensorFlow (CPU), input from a Python generator spending "
        f"{args.load_ms:g} ms per batch, a step of a few ms: input-bound. Under `gpuwhy run`; "
        "the live recording is analysed (`gpuwhy.analysis.diagnose`) every second until the top "
        f"finding is {EXPECTED}. Goal: within 30 s or 50 steps.",
        "",
    ]
    if found is None:
        lines.append(f"Not reached: the top finding never became {EXPECTED} while the job ran.")
    else:
        since_launch, since_start, steps, cost, share = found
        lines += [
            "| measure | value |",
            "|---|---|",
            f"| seconds from launching `gpuwhy run` | {since_launch:.1f} s |",
            f"| seconds from the recording's start | "
            f"{'n/a' if since_start is None else f'{since_start:.1f} s'} |",
            f"| training steps recorded by then | {steps} |",
            f"| one analysis of the live recording | {cost:.2f} s |",
            f"| train data-wait share at the first verdict | {_share(share)} |",
            f"| train data-wait share of the finished run | {_share(final_share)} |",
        ]
    lines += [
        "",
        "| s since launch | steps | top finding | train wait share | analysis s |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {t:.1f} | {steps} | {top} | {_share(share)} | {cost:.2f} |"
        for t, top, steps, cost, share in timeline
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    raise SystemExit(main())
