"""`gpuwhy run --profile` with a backend's own profiler (TensorFlow, JAX, torch), no code change:
over Keras train batches, and over the steps of plain TensorFlow and JAX loops; the trace read
back with its step markers and folded into the run's report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from gpuwhy.traces import load_traces
from support import framework_env

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "src" / "gpuwhy" / "schemas" / "report.schema.json").read_text())

# Per epoch: STEPS train batches of 16 and 2 validation batches. Under TensorFlow the batches
# come from tf.data with a slow read (the trace's IteratorGetNext), elsewhere from arrays.
_JOB = """
import sys, time
import numpy as np
import keras
STEPS, EPOCHS = int(sys.argv[1]), int(sys.argv[2])
backend = keras.config.backend()
rng = np.random.default_rng(0)
x = rng.random((16 * STEPS, 32), dtype="float32")
y = rng.random((16 * STEPS, 1), dtype="float32")
model = keras.Sequential(
    [keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)]
)
model.compile("sgd", "mse")
validation = (x[:32], y[:32])
if backend == "tensorflow":
    import tensorflow as tf

    def slow(a, b):
        time.sleep(0.002)
        return a, b

    data = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .batch(16)
        .map(lambda a, b: tf.numpy_function(slow, [a, b], [tf.float32, tf.float32]))
        .map(lambda a, b: (tf.ensure_shape(a, [None, 32]), tf.ensure_shape(b, [None, 1])))
    )
    model.fit(data, epochs=EPOCHS, validation_data=validation, verbose=0)
else:
    model.fit(x, y, batch_size=16, epochs=EPOCHS, validation_data=validation, verbose=0)
print("trained", backend)
"""


# A plain loop: a GradientTape step in a tf.function over a tf.data pipeline with a slow read
# (TensorFlow), or a jitted step over a generator of NumPy batches through gpuwhy.iterate (JAX).
_LOOP = """
import sys, time
import numpy as np
STEPS, EPOCHS = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
x = rng.random((16 * STEPS, 32), dtype="float32")
y = rng.random((16 * STEPS, 1), dtype="float32")
try:
    import tensorflow as tf
except ImportError:
    tf = None
if tf is not None:
    def slow(a, b):
        time.sleep(0.002)
        return a, b

    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(16).map(
        lambda a, b: tf.numpy_function(slow, [a, b], [tf.float32, tf.float32])
    )
    w = tf.Variable(tf.zeros((32, 1)))

    @tf.function
    def step(a, b):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((a @ w - b) ** 2)
        w.assign_sub(0.01 * tape.gradient(loss, w))

    for epoch in range(EPOCHS):
        for a, b in data:
            step(a, b)
    print("trained tensorflow")
else:
    import jax, jax.numpy as jnp
    import gpuwhy

    @jax.jit
    def step(w, a, b):
        return w - 0.01 * jax.grad(lambda w: jnp.mean((a @ w - b) ** 2))(w)

    def batches():
        for i in range(STEPS):
            time.sleep(0.002)
            yield x[16 * i : 16 * i + 16], y[16 * i : 16 * i + 16]

    w = jnp.zeros((32, 1))
    for epoch in range(EPOCHS):
        for a, b in gpuwhy.iterate(batches()):
            w = step(w, a, b)
    w.block_until_ready()
    print("trained jax")
"""


def _run(
    tmp_path: Path,
    python: Path,
    backend: str,
    profile: str,
    steps: int,
    epochs: int,
    job: str = _JOB,
) -> tuple[subprocess.CompletedProcess[str], dict]:
    script = tmp_path / "train.py"
    script.write_text(job)
    record, report = tmp_path / "r.gpuwhy.db", tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "run", "--record", str(record), "--profile", profile,
         "--json", str(report), "--", str(python), str(script), str(steps), str(epochs)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src"), COLUMNS="120",
                 KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == f"trained {backend}\n"  # the job's own output, untouched
    document = json.loads(report.read_text())
    jsonschema.validate(document, SCHEMA)
    return done, document


def _check_window(tmp_path: Path, document: dict, profiled: int) -> None:
    (trace,) = load_traces(str(tmp_path / "r.gpuwhy.profile"))
    # The step markers gpuwhy put around each profiled batch are the trace's steps.
    assert [number for number, _, _ in trace.steps] == list(range(1, profiled + 1))
    window = document["trace"]["window"]
    assert window["steps"] == profiled and window["skipped_steps"] == 10
    assert window["inside_over_outside"] > 0  # measured from the run's own step spans
    assert document["trace"]["ranks"][0]["steps"] == profiled


@pytest.mark.slow
def test_keras_on_tensorflow_profiles_three_batches_with_the_input_wait(tmp_path: Path) -> None:
    done, document = _run(tmp_path, framework_env("tf-cpu"), "tensorflow", "3", 20, 1)
    _check_window(tmp_path, document, 3)
    (trace,) = load_traces(str(tmp_path / "r.gpuwhy.profile"))
    assert trace.format == "xplane"
    # Each profiled batch pulled its data inside the train function: IteratorGetNext.
    first, last = trace.steps[0][1], trace.steps[-1][2]
    assert sum(first <= call.start_ns < last for call in trace.loader) >= 3
    assert "profiler window: 3 steps after the first 10" in done.stderr


@pytest.mark.slow
def test_keras_on_jax_profiles_across_an_epoch_end_without_validation(tmp_path: Path) -> None:
    # 12 batches an epoch: batch 11 warms the profiler up, 12 is step 1, the epoch ends
    # (validation runs outside any step), the next epoch's first 4 batches are steps 2-5.
    done, document = _run(tmp_path, Path(sys.executable), "jax", "5", 12, 2)
    _check_window(tmp_path, document, 5)
    assert "profiler window: 5 steps after the first 10" in done.stderr
    (trace,) = load_traces(str(tmp_path / "r.gpuwhy.profile"))
    recorded = document["phases"]["validation"]["steps"]
    assert recorded == 4  # two validation batches in each of the two epochs
    step_1_end, step_2_start = trace.steps[0][2], trace.steps[1][1]
    assert step_2_start > step_1_end  # the validation between them is in no step


@pytest.mark.slow
def test_keras_on_torch_ending_inside_the_window_keeps_what_it_profiled(tmp_path: Path) -> None:
    # 13 batches in all: warm-up at 11, steps 1-2 profiled, the fit ends inside the window.
    done, document = _run(tmp_path, Path(sys.executable), "torch", "5", 13, 1)
    _check_window(tmp_path, document, 2)
    assert "2 steps after the first 10 (of 5 asked: the job ended inside the window)" in (
        done.stderr.replace("\n", " ")
    )
    (trace,) = load_traces(str(tmp_path / "r.gpuwhy.profile"))
    assert trace.format == "kineto"  # torch.profiler's Chrome trace


@pytest.mark.slow
def test_a_tensorflow_custom_loop_is_profiled_over_its_pulls(tmp_path: Path) -> None:
    done, document = _run(tmp_path, framework_env("tf-cpu"), "tensorflow", "3", 20, 1, _LOOP)
    _check_window(tmp_path, document, 3)
    (trace,) = load_traces(str(tmp_path / "r.gpuwhy.profile"))
    assert trace.format == "xplane"
    assert "profiler window: 3 steps after the first 10" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("batches", ["gpuwhy.iterate(batches())", "batches()"])
def test_a_jax_loop_is_profiled_with_jax_profiler(tmp_path: Path, batches: str) -> None:
    """Its steps seen through gpuwhy.iterate, or through the compiled train step's calls."""
    # The main environment has TensorFlow too: the job imports JAX only (TensorFlow is hidden),
    # so the JAX window is the one that opens.
    hidden = tmp_path / "hide"
    (hidden / "tensorflow").mkdir(parents=True)
    (hidden / "tensorflow" / "__init__.py").write_text("raise ImportError('hidden')\n")
    script = _LOOP.replace(
        "import sys, time", f"import sys, time\nsys.path.insert(0, {str(hidden)!r})", 1
    ).replace("gpuwhy.iterate(batches())", batches)
    done, document = _run(tmp_path, Path(sys.executable), "jax", "4", 12, 2, script)
    _check_window(tmp_path, document, 4)
    (trace,) = load_traces(str(tmp_path / "r.gpuwhy.profile"))
    assert trace.format == "xplane" and trace.path.endswith(".xplane.pb")
    assert "profiler window: 4 steps after the first 10" in done.stderr
