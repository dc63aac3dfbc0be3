"""How many of gpuwhy's Python functions a step of a Keras `fit` calls on the training thread.

    KERAS_BACKEND=jax python calls_per_step_job.py

Counts calls into gpuwhy's modules (a profile function) during fits of 100 and 300 steps over
NumPy arrays; prints the per-step slope (what a fit's set-up calls cancels out) and the count of
each function over the longer fit, as JSON. Keras fixes its backend per process.
"""

from __future__ import annotations

import collections
import json
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from gpuwhy.hooks import auto, emitter

emitter.FLUSH_INTERVAL_S = 3600.0  # records held: the flusher's thread does not run among them
auto.install({})

import keras  # noqa: E402  (after install: patched as it is imported)
import numpy as np  # noqa: E402

BATCH = 32
GPUWHY = str(Path(auto.__file__).resolve().parents[1])

keras.utils.set_random_seed(0)
x = np.random.default_rng(0).normal(size=(BATCH * 300, 32)).astype("float32")
model = keras.Sequential(
    [keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)]
)
model.compile("sgd", "mse")


def fit(steps: int) -> None:
    n = BATCH * steps
    model.fit(x[:n], x[:n, :1], batch_size=BATCH, epochs=1, verbose=0, shuffle=False)


main = threading.get_ident()
calls: collections.Counter[str] = collections.Counter()


def count(frame: FrameType, event: str, arg: Any) -> None:
    code = frame.f_code
    if event == "call" and threading.get_ident() == main and code.co_filename.startswith(GPUWHY):
        calls[code.co_qualname] += 1


fit(10)  # compiled, and the first fit's one-time work done
totals = []
for steps in (100, 300):
    calls.clear()
    sys.setprofile(count)
    fit(steps)
    sys.setprofile(None)
    totals.append(sum(calls.values()))
print(json.dumps({"per_step": (totals[1] - totals[0]) / 200, "calls": dict(calls)}))
