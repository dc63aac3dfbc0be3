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


def _run(kind: str) -> dict[str, list[list[int]]]:
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
    result: dict[str, list[list[int]]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _check(kind: str) -> dict[str, list[list[int]]]:
    """The loop's phases against its own clocks; the job's result, for further checks."""
    result = _run(kind)
    walls, phases = result["walls"], result["phases"]
    assert len(phases) == len(walls) == 3
    for epoch, ((phase_start, phase_end), (start, end)) in enumerate(
        zip(phases, walls, strict=True)
    ):
        assert start <= phase_start and phase_end <= end  # inside the loop
        assert phase_start - start <= TOLERANCE_NS  # from the iterator's making on
        lost = (end - start) - (phase_end - phase_start)
        assert lost <= TOLERANCE_NS, f"epoch {epoch}: {lost / 1e6:.1f} ms outside its phase"
    return result


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


def test_an_iterable_dataset_s_slow_ends_are_the_loop_s_waits() -> None:
    # An IterableDataset read by 2 workers over uneven shards (12 and 8 items), each shard's end
    # taking 0.3 s (closing a remote file, say). Mid-loop, the batch of the shorter shard's
    # turn waits for that worker to say "no more" while the other worker's next batch is
    # already queued: a wait, not a batch handed over. The loop's last pull waits ~0.3 s for
    # the other worker's end, then for both to shut down: no step of its own, but the loop
    # stood still for it, inside the phase, and a wait.
    pytest.importorskip("torch")
    result = _check("streamend")
    end_s = 0.3  # loop_time_job.END_S
    for epoch, ((start, end), tail, (_, phase_end)) in enumerate(
        zip(result["walls"], result["tails"], result["phases"], strict=True)
    ):
        assert (end - tail) / 1e9 >= end_s * 0.9  # the job's own clock saw the slow end
        waits = [w for w in result["waits"] if start <= w[0] < end]
        # The shorter shard's end, less what its worker was ahead of the loop (2 batches).
        assert max(w[1] - w[0] for w in waits if w[2] > 0) / 1e9 >= end_s * 0.8, f"epoch {epoch}"
        ends = [w for w in waits if w[2] == 0]
        assert len(ends) == 1, f"epoch {epoch}: end-of-data waits {ends}"
        wait_start, wait_end, _ = ends[0]
        # From the last step's work to the phase's end, which is the loop's (checked above).
        assert abs(wait_start - tail) <= TOLERANCE_NS, f"epoch {epoch}"
        assert abs(wait_end - phase_end) <= TOLERANCE_NS, f"epoch {epoch}"
