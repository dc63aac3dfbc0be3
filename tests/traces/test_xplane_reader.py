"""TensorFlow/JAX profiles (`*.xplane.pb`): a real published GPU profile, and a real Keras job's
profile made here, read and reported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwhy.analysis.kernels.diagnosis import diagnose_traces
from gpuwhy.traces import TraceError, load_traces
from gpuwhy.traces.xplane import _pb2, environment_has_pb2

DATA = Path(__file__).resolve().parents[1] / "data" / "traces" / "tensorflow-profiler"
BERT = DATA / "bert_multi_gpu.xplane.pb"


@pytest.fixture(scope="module")
def pb2():  # type: ignore[no-untyped-def]
    if not environment_has_pb2():
        if os.environ.get("CI"):
            pytest.fail("TensorFlow's xplane definitions are missing from the test environment")
        pytest.skip("no TensorFlow or XProf here: xplane profiles cannot be read")
    return _pb2()


def test_every_stream_event_of_the_gpu_planes_is_kept(pb2) -> None:  # type: ignore[no-untyped-def]
    space = pb2.XSpace()
    space.ParseFromString(BERT.read_bytes())
    expected = {}
    for plane in space.planes:
        if plane.name.startswith("/device:GPU:"):
            count = sum(
                len(line.events) for line in plane.lines if line.name.startswith("Stream #")
            )
            if count:
                expected[int(plane.name.rsplit(":", 1)[1])] = count
    (trace,) = load_traces(str(BERT))
    kept = {}
    for device in trace.ops.device:
        kept[device] = kept.get(device, 0) + 1
    assert kept == expected == {1: 19, 4: 759, 6: 778}
    assert len(trace.steps) == 1 and trace.backward_seen
    assert len(trace.launch_start_ns) > 0 and all(trace.ops.correlation)


def test_the_bert_profile_gets_a_kernel_report(pb2) -> None:  # type: ignore[no-untyped-def]
    diagnosis = diagnose_traces(load_traces(str(BERT)))
    assert diagnosis.kernels.source == "xplane"
    (rank,) = diagnosis.kernels.ranks
    assert rank.steps == 1 and rank.step_markers
    assert 0.5 < rank.gpu_busy < 1.0
    phase = diagnosis.phases["train"]
    assert phase.gpu_busy is not None and set(phase.gpu_busy) == {1, 4, 6}


def test_a_corrupt_profile_is_one_line(pb2, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    broken = tmp_path / "host.xplane.pb"
    broken.write_bytes(BERT.read_bytes()[:1000])
    with pytest.raises(TraceError) as caught:
        load_traces(str(broken))
    assert "\n" not in caught.value.one_line() and caught.value.exit_code == 2


def _with_host_markers(pb2, keep_devices: bool) -> bytes:  # type: ignore[no-untyped-def]
    """The BERT profile with three root step markers ("train", step_num 7-9, _r=1) added to its
    host plane's first line, as `tf.profiler.experimental.Trace` writes them; and, unless
    `keep_devices`, without its GPU planes (a profile of a CPU)."""
    space = pb2.XSpace()
    space.ParseFromString(BERT.read_bytes())
    if not keep_devices:
        kept = [plane for plane in space.planes if not plane.name.startswith("/device:GPU:")]
        del space.planes[:]
        space.planes.extend(kept)
    host = next(plane for plane in space.planes if plane.name == "/host:CPU")
    name_id = max([*host.event_metadata.keys(), 0]) + 1
    host.event_metadata[name_id].id = name_id
    host.event_metadata[name_id].name = "train"
    stat_ids = {}
    for name in ("step_num", "_r"):
        stat_ids[name] = max([*host.stat_metadata.keys(), 0]) + 1
        host.stat_metadata[stat_ids[name]].id = stat_ids[name]
        host.stat_metadata[stat_ids[name]].name = name
    line = host.lines[0]
    for number in (7, 8, 9):
        event = line.events.add()
        event.metadata_id = name_id
        event.offset_ps = number * 10**9  # 1 ms apart, each 0.5 ms long
        event.duration_ps = 5 * 10**8
        event.stats.add(metadata_id=stat_ids["step_num"], int64_value=number)
        event.stats.add(metadata_id=stat_ids["_r"], int64_value=1)
    return bytes(space.SerializeToString())


def test_host_step_markers_are_the_steps_only_where_no_device_has_a_steps_line(
    pb2,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    with_gpus = tmp_path / "gpus" / "host.xplane.pb"
    cpu_only = tmp_path / "cpu" / "host.xplane.pb"
    for path, keep in ((with_gpus, True), (cpu_only, False)):
        path.parent.mkdir()
        path.write_bytes(_with_host_markers(pb2, keep))
    (marked,) = load_traces(str(with_gpus))
    (bert,) = load_traces(str(BERT))
    assert marked.steps == bert.steps and len(bert.steps) == 1  # XProf's derived step wins
    (trace,) = load_traces(str(cpu_only))
    assert [number for number, _, _ in trace.steps] == [7, 8, 9]
    assert [start for _, start, _ in trace.steps][1:] == [
        trace.steps[0][1] + 1_000_000,
        trace.steps[0][1] + 2_000_000,
    ]
    assert all(end - start == 500_000 for _, start, end in trace.steps)


_KERAS = """
import numpy as np, tensorflow as tf
x = np.random.rand(1024, 16).astype("float32"); y = np.random.randint(0, 2, 1024)
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(2)])
model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
class Window(tf.keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        if batch == 5:
            tf.profiler.experimental.start(LOGDIR)
        if batch == 15:
            tf.profiler.experimental.stop()
model.fit(ds, epochs=1, callbacks=[Window()], verbose=0)
"""


@pytest.mark.slow
def test_a_real_keras_profile_on_cpu_is_read_from_its_log_directory(
    pb2,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    logdir = tmp_path / "logs"
    script = tmp_path / "train.py"
    script.write_text(f"LOGDIR = {str(logdir)!r}\n" + _KERAS)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (trace,) = load_traces(str(logdir))  # the log directory: its newest run's host file
    assert trace.path.endswith(".xplane.pb")
    assert len(trace.loader) == 10  # one IteratorGetNext per batch profiled (5..14)
    assert len(trace.ops) == 0  # a CPU: no device plane
    diagnosis = diagnose_traces([trace])
    assert diagnosis.findings == [] and diagnosis.kernels.ranks[0].gpu_busy is None
