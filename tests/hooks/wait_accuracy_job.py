"""A real Keras training job for validating the measured data wait against ground truth.

    python wait_accuracy_job.py SETTING STEPS_PER_EXECUTION STEPS ROUNDS

Trains one small model, alternating in each round three timed `fit` calls of STEPS steps:
  slow  - the input pipeline as written (a slow map or a slow PyDataset), no gpuwhy;
  fast  - the same batches, already in memory, no gpuwhy;
  hooked - the slow pipeline with gpuwhy's hooks installed (a twin of the model, compiled
           under the hooks as `gpuwhy run` compiles it).
Ground truth, from the job's own clock over each fit's steady steps (from its second execution,
SteadyClock): wait fraction = 1 - fast wall / slow wall, the phase's speed-up = slow / fast.
Measured: what the report says of the hooked fit, computed by gpuwhy's own analysis from all of
its spans (the steady steps are gpuwhy's to find): the phase's data-wait fraction, and
`phase_speedup` as INPUT_BOUND computes it. `error` is the median over rounds of
(measured - truth) within each round (the machine's load drifts slowly; a round's runs share
it); `speedup_error` the median of measured / truth - 1. Prints one JSON line.

SETTINGs (tf.data, any backend): tf-serial, tf-prefetch (a source sleeping in C++: no CPU, no
GIL, like slow storage), tf-parallel (a map sleeping in C++, two calls in flight), tf-pymap,
tf-pyparallel (a Python map sleeping, serial or two calls in flight), tf-healthy;
pydataset, pydataset-healthy (keras.utils.PyDataset; any backend via KERAS_BACKEND).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from constructed import phase_stats

from gpuwhy.analysis import whatif
from gpuwhy.hooks import auto, emitter
from gpuwhy.model import Span

SLEEP_S = float(os.environ.get("WAIT_JOB_SLEEP_S", "0.012"))  # input cost per batch
BATCH = 64
WIDTH = int(os.environ.get("WAIT_JOB_WIDTH", "384"))


def main() -> None:
    setting, spe, steps, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    import keras
    import numpy as np

    if keras.config.backend() == "torch":
        import torch

        # torch's spinning intra-op threads make CPU step times swing by several x on a busy
        # 2-core machine; one thread keeps the truth measurable.
        torch.set_num_threads(1)
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    n_batches = 16
    x = rng.normal(size=(BATCH * n_batches, 32)).astype("float32")
    y = rng.normal(size=(BATCH * n_batches, 1)).astype("float32")
    slow, fast = _inputs(setting, x, y, n_batches)
    model = keras.Sequential(
        [
            keras.Input((32,)),
            keras.layers.Dense(WIDTH, activation="relu"),
            keras.layers.Dense(WIDTH, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    model.compile("adam", "mse", steps_per_execution=spe)
    # The hooked runs train a twin compiled under the hooks, as `gpuwhy run` compiles every
    # model: a loop compiled without them has no in-graph stamps (its wait is unknown), and one
    # compiled with them keeps its stamps when the hooks are gone.
    twin = keras.models.clone_model(model)
    twin.compile("adam", "mse", steps_per_execution=spe)
    spans: list[Span] = []
    steady = SteadyClock(keras)
    for data in (slow, fast):  # compile and warm both paths
        model.fit(data, steps_per_epoch=max(4, spe * 2), epochs=1, verbose=0)
    auto.install({})
    twin.fit(slow, steps_per_epoch=max(4, spe * 2), epochs=1, verbose=0)
    auto.uninstall()
    walls: dict[str, list[float]] = {"slow": [], "fast": [], "hooked": []}
    waits: list[float] = []
    speedups: list[float] = []
    for _ in range(rounds):
        for variant in ("slow", "fast", "hooked"):
            if variant == "hooked":
                spans.clear()
                emitter.configure(
                    lambda batch: spans.extend(r for r in batch if isinstance(r, Span))
                )
                auto.install({})
            (twin if variant == "hooked" else model).fit(
                fast if variant == "fast" else slow,
                steps_per_epoch=steps,
                epochs=1,
                verbose=0,
                callbacks=[steady],
            )
            wall = steady.wall_s
            walls[variant].append(wall)
            if variant == "hooked":
                emitter.flush(5.0)
                auto.uninstall()
                emitter.configure(None)
                train = phase_stats(spans, steady.begin_ns, steady.end_ns)["train"]
                waits.append(train.data_wait_fraction or 0.0)
                speedups.append(
                    whatif.phase_speedup(train.steady_time_s or 0.0, train.steady_data_wait_s)
                )
    median = {k: statistics.median(v) for k, v in walls.items()}
    # Rounds are paired: load on the machine drifts slowly, so a round's three runs share it.
    errors = [w - (1 - f / s) for w, f, s in zip(waits, walls["fast"], walls["slow"], strict=True)]
    speedup_errors = [
        m / (s / f) - 1 for m, f, s in zip(speedups, walls["fast"], walls["slow"], strict=True)
    ]
    print(
        json.dumps(
            {
                "setting": setting,
                "steps_per_execution": spe,
                "backend": keras.config.backend(),
                "truth": 1 - median["fast"] / median["slow"],
                "measured": statistics.median(waits),
                "error": statistics.median(errors),
                "speedup_truth": median["slow"] / median["fast"],
                "speedup_measured": statistics.median(speedups),
                "speedup_error": statistics.median(speedup_errors),
                "overhead": median["hooked"] / median["slow"] - 1,
                "step_ms_fast": median["fast"] / steps * 1e3,
                "walls": walls,
                "waits": waits,
            }
        )
    )


class SteadyClock:
    """Times a fit from its second execution on: every run, hooked or not, then excludes the
    iterator start-up of the first batch (a real wait, paid alike by the slow and fast runs,
    so the ground truth could not see it). `begin_ns`/`end_ns`: the whole fit."""

    def __new__(cls, keras: object) -> object:  # a keras Callback made once Keras is imported
        base = keras.callbacks.Callback  # type: ignore[attr-defined]

        class Steady(base):  # type: ignore[misc, valid-type]
            async_safe = True

            def on_train_begin(self, logs: object = None) -> None:
                self.begins = 0
                self.begin_ns = time.monotonic_ns()

            def on_train_batch_begin(self, batch: int, logs: object = None) -> None:
                self.begins += 1
                if self.begins == 2:
                    self.from_ns = time.monotonic_ns()

            def on_train_end(self, logs: object = None) -> None:
                self.end_ns = time.monotonic_ns()
                self.wall_s = (self.end_ns - self.from_ns) / 1e9

        return Steady()


def _inputs(setting: str, x: object, y: object, n_batches: int) -> tuple[object, object]:
    if setting.startswith("pydataset"):
        return _pydatasets(setting, x, y, n_batches)
    import tensorflow as tf

    def slow_map(a: object, b: object) -> tuple[object, object]:
        def sleep(value: object) -> object:
            time.sleep(SLEEP_S)
            return value

        a2 = tf.py_function(sleep, [a], tf.float32)
        a2.set_shape(a.shape)  # type: ignore[attr-defined]
        return a2, b

    from tensorflow.python.data.experimental.ops import testing

    def sleepy(dataset: object) -> object:  # a slow source that takes no CPU (slow storage)
        return dataset.apply(testing.sleep(int(SLEEP_S * 1e6)))  # type: ignore[attr-defined]

    base = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
    if setting == "tf-serial":
        slow = sleepy(base)
    elif setting == "tf-parallel":  # a map whose calls sleep in C++, two in flight

        def sleep_in_map(a: object, b: object) -> object:
            pair = tf.data.Dataset.from_tensors((a, b))
            return sleepy(pair).get_single_element()  # type: ignore[attr-defined]

        slow = base.map(sleep_in_map, num_parallel_calls=2)
    elif setting == "tf-pyparallel":  # two Python map calls in flight: they contend for the GIL
        slow = base.map(slow_map, num_parallel_calls=2)
    elif setting == "tf-prefetch":
        slow = sleepy(base).prefetch(2)
    elif setting == "tf-pymap":  # the slow step is Python, holding the GIL at its ends
        slow = base.map(slow_map)
    elif setting == "tf-healthy":
        slow = base.cache()
    else:
        raise SystemExit(f"unknown setting {setting}")
    if os.environ.get("WAIT_JOB_AUTOTUNE", "0") == "0":
        # tf.data's autotuner makes run-to-run timings bimodal here (its prefetch buffer
        # sometimes stays empty for a whole run); off, each setting does what it says.
        options = tf.data.Options()
        options.autotune.enabled = False
        slow = slow.with_options(options)
    fast = slow.cache()
    for _ in fast:  # materialise: the fast run never pays the input cost
        pass
    return slow.repeat(), fast.repeat()


def _pydatasets(setting: str, x: object, y: object, n_batches: int) -> tuple[object, object]:
    import keras

    class Batches(keras.utils.PyDataset):
        def __init__(self, sleep_s: float) -> None:
            super().__init__()
            self.sleep_s = sleep_s

        def __len__(self) -> int:
            return 100_000  # as many steps as any fit asks for

        def __getitem__(self, i: int) -> tuple[object, object]:
            if self.sleep_s:
                time.sleep(self.sleep_s)
            i %= n_batches
            return x[i * BATCH : (i + 1) * BATCH], y[i * BATCH : (i + 1) * BATCH]  # type: ignore[index]

    return Batches(0.0 if setting.endswith("healthy") else SLEEP_S), Batches(0.0)


if __name__ == "__main__":
    main()
