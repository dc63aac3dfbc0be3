"""The job the overhead benchmark runs: a healthy, compute-bound Keras-on-TensorFlow training.

Data in memory behind cache().prefetch(), a model large enough that the steps dominate, a small
validation set. Prints the seconds `fit` took, so the benchmark can separate gpuwhy's cost inside
the job (hooks, sampler) from its start-up and wrap-up.

    python bench/keras_healthy_job.py --hooks-ab 12

instead alternates, in one process, `fit` without and with gpuwhy's hooks (installed as
`gpuwhy run` installs them, spans delivered to memory) and prints the CPU time of each fit
(every thread of the process, user + system: steadier than wall time on a shared machine) and
the median over rounds of the paired difference.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

BATCH = 128


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=60, help="training batches per epoch")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument(
        "--hooks-ab",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="alternate fits without/with the hooks in this process",
    )
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)

    def dataset(batches: int) -> tf.data.Dataset:
        x = rng.normal(size=(batches * BATCH, 256)).astype("float32")
        y = rng.integers(0, 10, size=(batches * BATCH,)).astype("int64")
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).cache().prefetch(2)

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
    train, validation = dataset(args.batches), dataset(max(args.batches // 10, 1))
    if args.hooks_ab:
        # The hooked runs train a twin compiled under the hooks, as `gpuwhy run` compiles every
        # model (a Keras loop compiled without them has no in-graph stamps).
        twin = tf.keras.models.clone_model(model)
        twin.compile(
            optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        )
        hooks_ab({False: model, True: twin}, train, validation, args.epochs, args.hooks_ab)
        return
    start = time.monotonic()
    model.fit(train, validation_data=validation, epochs=args.epochs, verbose=0, shuffle=False)
    print(f"fit_s={time.monotonic() - start:.3f}", flush=True)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def hooks_ab(
    models: dict[bool, object], train: object, validation: object, epochs: int, rounds: int
) -> None:
    """CPU seconds of `fit` without and with the hooks, alternated (ABBA...) in this process;
    `models[hooked]` trains each."""
    from gpuwhy.hooks import auto, emitter

    delivered: list[object] = []

    def fit(hooked: bool) -> tuple[float, float]:
        if hooked:
            emitter.configure(delivered.extend)
            auto.install({})
        cpu, wall = _cpu_s(), time.monotonic()
        models[hooked].fit(
            train,
            validation_data=validation,
            epochs=epochs,
            verbose=0,  # type: ignore[attr-defined]
            shuffle=False,
        )
        cpu, wall = _cpu_s() - cpu, time.monotonic() - wall
        if hooked:
            emitter.flush(5.0)
            auto.uninstall()
            emitter.configure(None)
            delivered.clear()
        return cpu, wall

    fit(False), fit(True)  # warm-up: tracing each model
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for number in range(rounds):
        for hooked in (False, True) if number % 2 == 0 else (True, False):
            runs[hooked].append(fit(hooked))
    deltas = [h[0] - b[0] for h, b in zip(runs[True], runs[False], strict=True)]
    for hooked in (False, True):
        cpu = [c for c, _ in runs[hooked]]
        print(
            f"{'hooked' if hooked else 'bare  '} fit CPU s: median {statistics.median(cpu):.3f}"
            f" ({', '.join(f'{c:.3f}' for c in cpu)})"
        )
    ratio = statistics.median(h / b for (h, _), (b, _) in zip(runs[True], runs[False], strict=True))
    print(
        f"hooks_cpu_delta_s={statistics.median(deltas):.4f} hooks_cpu_ratio={ratio:.4f} "
        "(medians over rounds of the paired difference and ratio)",
        flush=True,
    )


if __name__ == "__main__":
    main()
