"""How a loop's input is made (input_pipelines.py), described from real DataLoaders and real
tf.data pipelines as their iterators are made, and sent once per pipeline."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from hookspans import Collected

from gpuwhy.hooks import input_pipelines
from gpuwhy.model import SpanKind
from gpuwhy.wire import INPUT_EVENT


def _described(hooks: Collected) -> list[dict[str, Any]]:
    return [dict(event.data) for event in hooks.events(INPUT_EVENT)]


def test_each_dataloader_is_described_once_with_its_workers(hooks: Collected) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, IterableDataset, TensorDataset

    class Stream(IterableDataset):  # type: ignore[misc]
        def __iter__(self) -> Any:
            return iter(torch.zeros(4, 2))

    data = TensorDataset(torch.zeros(8, 2))
    loaders = [
        DataLoader(data, batch_size=2),
        DataLoader(data, batch_size=2, num_workers=2, persistent_workers=True),
        DataLoader(Stream(), batch_size=2),
    ]
    for loader in loaders:
        for _ in range(3):  # every epoch makes an iterator; the loader is described once
            for _batch in loader:
                pass
    serial, workers, stream = _described(hooks)
    cores = len(os.sched_getaffinity(0))
    assert serial == {
        "source": "DataLoader",
        "workers": 0,
        "prefetch_factor": None,
        "persistent_workers": False,
        "pin_memory": False,
        "iterable": False,
        "cores": cores,
    }
    assert workers["workers"] == 2 and workers["prefetch_factor"] == 2
    assert workers["persistent_workers"] is True
    assert stream["iterable"] is True and stream["workers"] == 0


def test_the_event_is_stamped_where_the_loop_begins(hooks: Collected) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, TensorDataset

    loader = DataLoader(TensorDataset(torch.zeros(4, 2)), batch_size=2)
    net = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for (x,) in loader:
        optimizer.zero_grad()
        net(x).sum().backward()
        optimizer.step()
    (event,) = hooks.events(INPUT_EVENT)
    first = min(s.start_ns for s in hooks.spans(SpanKind.STEP, "train"))
    # The iterator is made, then its first pull opens the loop's first step.
    assert event.t_ns <= first


def test_tf_data_pipelines_are_described_by_their_stages(hooks: Collected) -> None:
    tf = pytest.importorskip("tensorflow")
    import numpy as np

    def read(x: Any) -> Any:
        time.sleep(0)
        return x

    def generate() -> Any:
        for i in range(4):
            yield np.full(2, i, dtype="int64")

    base = tf.data.Dataset.range(8).batch(2)
    serial_python = base.map(lambda x: tf.numpy_function(read, [x], tf.int64))
    parallel = base.map(lambda x: x + 1, num_parallel_calls=2).cache().prefetch(1)
    generated = tf.data.Dataset.from_generator(
        generate, output_signature=tf.TensorSpec((2,), tf.int64)
    ).batch(2)
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    unprefetched = base.map(lambda x: x * 2).with_options(options)
    interleaved = tf.data.Dataset.range(2).interleave(
        lambda i: tf.data.Dataset.from_tensors(i), num_parallel_calls=2
    )
    for dataset in (serial_python, parallel, generated, unprefetched, interleaved):
        for _ in range(2):  # two epochs, one description
            for _batch in dataset:
                pass
    described = _described(hooks)
    assert len(described) == 5
    first, second, third, fourth, fifth = described
    assert first == {
        "source": "tf.data",
        "parallel": False,
        "prefetch": False,
        "injected_prefetch": True,
        "cache": False,
        "python": True,
        "generator": False,
        "stages": ["BatchDataset", "MapDataset", "RangeDataset"],
        "cores": len(os.sched_getaffinity(0)),
    }
    assert second["parallel"] and second["prefetch"] and second["cache"]
    assert not second["python"]
    assert third["generator"] and third["python"] and not third["parallel"]
    assert fourth["injected_prefetch"] is False and not fourth["python"]
    assert fifth["parallel"] and not fifth["prefetch"]


def test_keras_fit_describes_the_dataset_it_was_given(hooks: Collected) -> None:
    pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("Keras runs on another backend here")
    import numpy as np
    import tensorflow as tf

    x = np.zeros((32, 4), "float32")
    ds = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(8)
    ds = ds.map(lambda a, b: (a + 1, b), num_parallel_calls=tf.data.AUTOTUNE)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(ds, epochs=2, verbose=0, shuffle=False)
    described = _described(hooks)
    assert described and all(d["source"] == "tf.data" for d in described)
    assert described[0]["parallel"] is True


def test_a_pipeline_it_cannot_read_is_not_described(hooks: Collected) -> None:
    class Odd:
        def _inputs(self) -> list[Any]:
            raise RuntimeError("not a dataset")

    input_pipelines.dataset_made(Odd(), 1)
    assert _described(hooks) == []
    assert any("not described" in e.message for e in hooks.events("hook"))


def test_a_distributed_dataset_is_described_from_its_source(hooks: Collected) -> None:
    tf = pytest.importorskip("tensorflow")

    def read(x: Any) -> Any:
        return x

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    ds = tf.data.Dataset.range(8).batch(4).map(lambda x: tf.numpy_function(read, [x], tf.int64))
    for _batch in strategy.experimental_distribute_dataset(ds):
        pass
    described = _described(hooks)
    # The pipeline the job built, not the per-device buffer tf.distribute reads it through.
    assert described and all("MapDataset" in d["stages"] for d in described), described
    assert all(d["python"] and not d["parallel"] for d in described)
