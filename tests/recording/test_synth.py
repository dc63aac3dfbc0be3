"""The synthetic recording generator: deterministic, labelled, and shaped like a training run.

Every recording here is synthetic (constructed data from tests/support/synth).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest

from gpuwhy.errors import RecordingError
from gpuwhy.model import NS_PER_S, SpanKind
from gpuwhy.recording import Recording
from support.synth import main, synthesize
from support.synth.shapes import STALL_NS


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with Recording.open(path) as rec:
        for stream in (rec.gpu_samples(), rec.util_samples(), rec.host_samples(), rec.spans()):
            for record in stream:
                digest.update(repr(record).encode())
    return digest.hexdigest()


def test_the_same_seed_gives_the_same_recording(tmp_path: Path) -> None:
    a = synthesize(tmp_path / "a.gpuwhy.db", hours=0.02, gpus=2, seed=3)
    b = synthesize(tmp_path / "b.gpuwhy.db", hours=0.02, gpus=2, seed=3)
    c = synthesize(tmp_path / "c.gpuwhy.db", hours=0.02, gpus=2, seed=4)
    assert _digest(Path(a.path)) == _digest(Path(b.path)) != _digest(Path(c.path))


def test_shapes_of_a_training_run(tmp_path: Path) -> None:
    result = synthesize(tmp_path / "run.gpuwhy.db", hours=0.25, gpus=4, seed=2)
    with Recording.open(result.path) as rec:
        assert rec.complete
        assert rec.meta["synthetic"]["generator"] == "tests/support/synth"
        assert "not measured" in rec.meta["synthetic"]["note"]
        assert [d.name for d in rec.devices] == ["NVIDIA H100 80GB HBM3"] * 4
        start, end = rec.meta["start_ns"], rec.meta["end_ns"]
        low, high = rec.time_range()
        assert start <= low and high <= end
        # Epochs of training, each followed by a validation pass.
        phases = [s for s in rec.spans(kind=SpanKind.PHASE)]
        names = [s.phase for s in phases]
        assert names[:4] == ["train", "validation", "train", "validation"]
        assert all(start < s.start_ns and s.end_ns < end for s in phases)
        # Steps wait a millisecond or two for input, and now and then much longer (stalls).
        waits = [s.end_ns - s.start_ns for s in rec.spans(kind=SpanKind.WAIT, phase="train")]
        stalls = [w for w in waits if w >= STALL_NS[0]]
        assert 0.005 < len(stalls) / len(waits) < 0.05
        assert sorted(waits)[len(waits) // 2] < 5_000_000
        # The busy GPUs: utilization high in training, lower in validation; the last GPU idle.
        train = [s for s in phases if s.phase == "train"][1]
        validation = [s for s in phases if s.phase == "validation"][1]
        during = rec.gpu_summary(train.start_ns + NS_PER_S, train.end_ns)
        assert during[0].mean("util_gpu_pct") > 85
        assert during[3].summary("util_gpu_pct").maximum == 0  # type: ignore[union-attr]
        assert during[3].reason_counts == {1: during[3].samples}  # NVML: GPU idle
        assert rec.gpu_summary(validation.start_ns + NS_PER_S, validation.end_ns)[0].mean(
            "util_gpu_pct"
        ) < during[0].mean("util_gpu_pct")  # type: ignore[operator]
        # A stall shows in the driver's 1/6 s samples and is smoothed in the polled counter.
        stall = next(
            s
            for s in rec.spans(kind=SpanKind.WAIT, phase="train")
            if s.end_ns - s.start_ns > 400_000_000
        )
        buffered = [
            u.value_pct
            for u in rec.util_samples(
                device=0, start_ns=stall.start_ns + 200_000_000, end_ns=stall.end_ns
            )
        ]
        assert buffered and min(buffered) <= 5
        # Memory: a plateau after the model is built; power follows utilization.
        memory = rec.gpu_summary(train.start_ns, train.end_ns)[0].summary("memory_used_bytes")
        assert memory is not None and memory.maximum - memory.minimum < 128 << 20
        assert during[0].mean("power_mw") > 3 * during[3].mean("power_mw")  # type: ignore[operator]
        assert not rec.util_summary(device=3)  # an idle GPU has no buffered samples (NVML)


@pytest.mark.slow
def test_throttling_episodes_appear_in_a_long_run(tmp_path: Path) -> None:
    result = synthesize(tmp_path / "long.gpuwhy.db", hours=6, gpus=1, rate_hz=1, seed=5)
    with Recording.open(result.path) as rec:
        reasons: Counter[int] = Counter()
        for bucket in rec.gpu_tiers(60 * NS_PER_S):
            reasons.update(bucket.reason_counts)
        # minutes of power capping (SW_POWER_CAP, references.md#nvml-clock-events)
        assert reasons[4] > 5 * 60
        clocks = rec.gpu_summary()[0].summary("sm_clock_mhz")
        assert clocks is not None and clocks.minimum < 1800 < clocks.maximum


def test_bad_arguments_and_existing_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        synthesize(tmp_path / "x.gpuwhy.db", hours=0)
    with pytest.raises(ValueError):
        synthesize(tmp_path / "y.gpuwhy.db", via="fast")
    path = tmp_path / "z.gpuwhy.db"
    path.write_text("someone's file")
    with pytest.raises(RecordingError, match="already exists"):
        synthesize(path, hours=0.01)
    assert path.read_text() == "someone's file"


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli.gpuwhy.db"
    assert main([str(out), "--hours", "0.02", "--gpus", "2", "--seed", "1"]) == 0
    assert "GPU samples" in capsys.readouterr().out
    with Recording.open(out) as rec:
        assert sum(1 for _ in rec.gpu_samples()) == 0.02 * 3600 * 10 * 2
