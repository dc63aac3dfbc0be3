"""gpuwhy.monitor(): in-process recording, with the hooks' spans going straight to the writer."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gpuwhy
from gpuwhy.model import SpanKind
from gpuwhy.recording.reader import Recording


def _busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(1000))


def test_monitor_records_this_process(tmp_path: Path) -> None:
    path = tmp_path / "m.gpuwhy.db"
    with gpuwhy.monitor(path, interval_s=0.05) as mon:
        _busy(1.3)  # the host source reads every 0.5 s
    assert mon.path == path
    with Recording.open(path) as recording:
        assert recording.complete
        assert recording.meta["python"] == sys.executable
        assert recording.meta["command"][0] == sys.executable
        hosts = list(recording.host_samples())
    assert len(hosts) >= 2
    assert max(h.job_cpu_pct or 0 for h in hosts) > 20  # the busy loop shows


def test_spans_from_the_hooks_reach_the_recording(tmp_path: Path) -> None:
    path = tmp_path / "m.gpuwhy.db"
    with gpuwhy.monitor(path), gpuwhy.phase("train"):
        for _ in range(5):
            with gpuwhy.step():
                _busy(0.01)
    with Recording.open(path) as recording:
        steps = list(recording.spans(kind=SpanKind.STEP, phase="train"))
        phases = list(recording.spans(kind=SpanKind.PHASE, phase="train"))
    assert sum(span.steps for span in steps) == 5
    assert len(phases) == 1


def test_an_exception_still_leaves_a_complete_recording(tmp_path: Path) -> None:
    path = tmp_path / "m.gpuwhy.db"
    with pytest.raises(ValueError, match="bad batch"), gpuwhy.monitor(path):
        raise ValueError("bad batch")
    with Recording.open(path) as recording:
        assert recording.complete
        assert ("exception", "ValueError: bad batch") in [
            (event.kind, event.message) for event in recording.events()
        ]


def test_default_path_is_under_gpuwhy_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with gpuwhy.monitor() as mon:
        pass
    assert mon.path.parent == Path("gpuwhy-runs")
    assert (tmp_path / mon.path).is_file()


def test_public_names_are_lazy_and_import_gpuwhy_stays_light() -> None:
    code = (
        "import sys, gpuwhy\n"
        "heavy = {'gpuwhy.runtime', 'gpuwhy.hooks', 'gpuwhy.recording', 'rich', 'psutil',"
        " 'sqlite3', 'tensorflow', 'torch', 'jax'}\n"
        "assert not heavy & set(sys.modules), heavy & set(sys.modules)\n"
        "from gpuwhy.runtime.monitor import monitor\n"
        "assert gpuwhy.monitor is monitor\n"
        "assert set(gpuwhy.__all__) <= set(dir(gpuwhy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        gpuwhy.nope  # noqa: B018


@pytest.mark.slow
def test_monitor_sees_a_keras_fit_without_a_callback(tmp_path: Path) -> None:
    """The auto-instrumentation comes with monitor(), as under `gpuwhy run`."""
    code = (
        "import os, sys; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\n"
        "import gpuwhy, numpy as np\n"
        "with gpuwhy.monitor(sys.argv[1]):\n"
        "    import keras\n"
        "    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])\n"
        "    m.compile('sgd', 'mse')\n"
        "    m.fit(np.zeros((32, 4)), np.zeros((32, 1)), batch_size=8, epochs=1, verbose=0)\n"
    )
    path = tmp_path / "m.gpuwhy.db"
    src = Path(gpuwhy.__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(src), KERAS_BACKEND="tensorflow")
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, env=env, timeout=180)
    with Recording.open(path) as recording:
        steps = [s for s in recording.spans(kind=SpanKind.STEP) if s.phase == "train"]
    assert sum(s.steps for s in steps) == 4
