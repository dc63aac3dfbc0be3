"""Keras on the backend KERAS_BACKEND names, instrumented; prints a JSON summary of its spans.

    KERAS_BACKEND=jax python keras_backend_job.py STEPS_PER_EXECUTION SLEEP_S [plain]

fit (2 epochs of 6 batches, validation on 2) and predict (3 batches) over a PyDataset whose
batches each take SLEEP_S to load ("plain": without gpuwhy, to compare results). Keras fixes
its backend per process, hence a subprocess.
"""

from __future__ import annotations

import json
import sys
import time

from gpuwhy.hooks import auto, emitter
from gpuwhy.model import Event, Span

records: list[Span | Event] = []
if sys.argv[3:] != ["plain"]:
    emitter.configure(records.extend)
    auto.install({})

import keras  # noqa: E402  (after install: patched as it is imported)
import numpy as np  # noqa: E402

SPE, SLEEP_S = int(sys.argv[1]), float(sys.argv[2])


class Batches(keras.utils.PyDataset):
    def __init__(self, count: int) -> None:
        super().__init__()
        rng = np.random.default_rng(count)
        self.x = rng.normal(size=(count * 8, 4)).astype("float32")
        self.y = rng.normal(size=(count * 8, 1)).astype("float32")
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> tuple[object, object]:
        time.sleep(SLEEP_S)
        return self.x[i * 8 : (i + 1) * 8], self.y[i * 8 : (i + 1) * 8]


keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dense(1)])
model.compile("sgd", "mse", steps_per_execution=SPE)
history = model.fit(Batches(6), epochs=2, validation_data=Batches(2), verbose=0)
model.predict(Batches(3), verbose=0)
emitter.flush(5.0)
print(
    json.dumps(
        {
            "backend": keras.config.backend(),
            "loss": history.history["loss"] + history.history["val_loss"],
            "weights": [w.tolist() for w in model.get_weights()],
            "spans": [
                [s.phase, s.kind.name, s.start_ns, s.end_ns, s.step, s.steps]
                for s in records
                if isinstance(s, Span)
            ],
            "events": [[e.kind, e.message] for e in records if isinstance(e, Event)],
            "inputs": [dict(e.data) for e in records if isinstance(e, Event) and e.kind == "input"],
        }
    )
)
