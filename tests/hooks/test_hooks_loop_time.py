"""No lost time: a plain loop's phase lasts as long as the loop itself, epoch by epoch.

A plain loop begins when its iterator is made (building the pipeline, starting workers) and
ends when its last pull finds the data's end (workers shutting down); both are time the loop
stood still for its input, which the hooks put into its first and last steps. Real tf.data and
torch DataLoader loops, each in an interpreter of its own as a job runs (loop_time_job.py);
each epoch's implicit "train" phase is compared with the loop's own clock, taken around the
`for` statement.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timing]  # real framework loops, held to 5 ms
HERE = Path(__file__).resolve().parent
TOLERANCE_NS = 5_000_000  # "within a few milliseconds per epoch"


def _run(kind: str) -> tuple[list[list[int]], list[list[int]]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    done = subprocess.run(
        [sys.executable, str(HERE / "loop_time_job.py"), kind],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["walls"], result["phases"]


def _check(kind: str) -> None:
    walls, phases = _run(kind)
    assert len(phases) == len(walls) == 3
    for epoch, ((phase_start, phase_end), (start, end)) in enumerate(
        zip(phases, walls, strict=True)
    ):
        assert start <= phase_start and phase_end <= end  # inside the loop
        assert phase_start - start <= TOLERANCE_NS  # from the iterator's making on
        lost = (end - start) - (phase_end - phase_start)
        assert lost <= TOLERANCE_NS, f"epoch {epoch}: {lost / 1e6:.1f} ms outside its phase"


@pytest.mark.parametrize("kind", ["tfdata", "tfgen"])
def test_a_tf_data_loop_loses_no_time(kind: str) -> None:
    # Destroying a tf.data iterator, when the loop lets go of it after its last pull, stops
    # the pipeline's threads: now and then ~75 ms (autotuning's), which the loop's last step
    # holds.
    pytest.importorskip("tensorflow")
    _check(kind)


@pytest.mark.parametrize("hold_ms", [0, 50])
def test_an_iterator_held_after_its_loop_is_not_the_loop_s(hold_ms: int) -> None:
    # Destroyed when the next loop's iterator replaces it, at once or 50 ms later: the phase
    # ends with the loop, the next one begins with its own iterator.
    pytest.importorskip("tensorflow")
    _check(f"tfheld{hold_ms}")


@pytest.mark.parametrize("workers", [0, 2])
def test_a_dataloader_loop_loses_no_time(workers: int) -> None:
    pytest.importorskip("torch")
    _check(f"loader{workers}")
