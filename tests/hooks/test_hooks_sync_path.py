"""Counted syncs end to end: job -> socket (wire) -> recording -> RunContext -> SYNC_BOUND.

The job runs for real under `gpuwhy run`; on this CPU machine it cannot read a device value, so
the job calls the counter every wrapper calls (`tracker.count_sync`) where a GPU job would call
`loss.item()`: a stand-in for the device read, not for anything downstream of it. The rule
needs GPU utilization, so the recorded spans and events are then written, with CONSTRUCTED GPU
samples (tests/analysis/constructed.py), into a recording the analysis diagnoses. The GPU-marked
test does the whole thing with real CUDA reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from analysis.constructed import GPU_OK_ENV, H100, Run
from gpuwhy.analysis import diagnose
from gpuwhy.model import Event, Span
from gpuwhy.recording.reader import Recording

ROOT = Path(__file__).resolve().parents[2]
STEPS = 60  # 1.2 s of training: rules judge phases of a second or more

JOB = textwrap.dedent(f"""
    import time
    import gpuwhy
    from gpuwhy.hooks import tracker

    with gpuwhy.phase("train"):
        for batch in gpuwhy.iterate(range({STEPS})):  # timed input: each pull begins a step
            time.sleep(0.02)
            tracker.count_sync()  # stands in for loss.item() on a GPU
            tracker.count_sync()  # ... and for print(loss)
""")


def job_python() -> str:
    """The bare test environment where it exists: its environment probe answers fastest."""
    root = os.environ.get("GPUWHY_TEST_ENVS")
    if root and Path(root, "bare", ".done").exists():
        return str(Path(root, "bare", "bin", "python"))
    return sys.executable


def gpuwhy_run(tmp_path: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """`command` under `gpuwhy run`, recording to tmp_path/job.gpuwhy.db with the JSON report
    in tmp_path/job.json; it must exit 0."""
    record = tmp_path / "job.gpuwhy.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuwhy",
            "run",
            "--quiet",
            "--record",
            str(record),
            "--json",
            str(tmp_path / "job.json"),
            "--",
            *command,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_counted_syncs_reach_the_rule_through_a_real_recording(tmp_path: Path) -> None:
    gpuwhy_run(tmp_path, job_python(), "-c", JOB)
    record = tmp_path / "job.gpuwhy.db"
    with Recording.open(record) as recording:
        spans = list(recording.spans())
        events = list(recording.events())
    syncs = [e for e in events if e.kind == "sync"]
    assert sum(e.data["count"] for e in syncs) == 2 * STEPS
    assert sum(e.data["steps"] for e in syncs) == STEPS
    assert {e.data["phase"] for e in syncs} == {"train"}

    # The same spans and events, beside CONSTRUCTED GPU samples: a GPU 30 % busy in training.
    start_ns = min(s.start_ns for s in spans)
    end_ns = max(s.end_ns for s in spans)
    run = Run(
        tmp_path / "with-gpu.db",
        duration_s=(end_ns - start_ns) / 1e9 + 1,
        devices=[H100],
        environment=GPU_OK_ENV,
    )
    for span in spans:
        run.writer.put(
            Span(
                span.phase,
                span.kind,
                span.start_ns - start_ns + 500_000_000,
                span.end_ns - start_ns + 500_000_000,
                span.step,
                span.steps,
            )
        )
    for event in events:
        run.writer.put(
            Event(max(0, event.t_ns - start_ns), event.kind, event.message, dict(event.data))
        )
    run.gpu(
        0,
        0.5,
        0.5 + (end_ns - start_ns) / 1e9,
        every_s=0.02,
        util_gpu_pct=30,
        job_memory_bytes=2**30,
    )
    with run.close() as recording:
        diagnosis = diagnose(recording)
    finding = next(f for f in diagnosis.findings if f.code in ("SYNC_BOUND", "HOST_BOUND"))
    assert finding.code == "SYNC_BOUND"
    assert finding.evidence["syncs_per_step"] == 2.0
    assert finding.evidence["synced_step_fraction"] == 1.0


@pytest.mark.gpu
@pytest.mark.slow
def test_a_torch_job_that_reads_its_loss_every_step_is_sync_bound(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "item_every_step.py"
    script.write_text(
        textwrap.dedent("""
        import torch
        device = torch.device("cuda")
        data = torch.utils.data.TensorDataset(torch.randn(4096, 64), torch.randn(4096, 1))
        loader = torch.utils.data.DataLoader(data, batch_size=16)  # small steps: host-bound
        net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                  torch.nn.Linear(64, 1)).to(device)
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
        for epoch in range(3):
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(net(x), y)
                loss.backward()
                optimizer.step()
                print(f"{loss.item():.4f}", end="\\r")
    """)
    )
    gpuwhy_run(tmp_path, sys.executable, str(script))
    record = tmp_path / "job.gpuwhy.db"
    with Recording.open(record) as recording:
        syncs = [e for e in recording.events() if e.kind == "sync"]
    steps = 3 * 4096 // 16
    assert sum(e.data["count"] for e in syncs) >= steps  # item(); format goes through it
    assert sum(e.data["steps"] for e in syncs) >= steps - 3  # the last step of each epoch may
    report = json.loads((tmp_path / "job.json").read_text())  # end with its loop
    codes = [f["code"] for f in report["findings"]]
    assert "HOST_BOUND" not in codes
    if "SYNC_BOUND" in codes:  # only where the GPU idled over half the time, as it should here
        sync_bound = next(f for f in report["findings"] if f["code"] == "SYNC_BOUND")
        assert sync_bound["evidence"]["syncs_per_step"] >= 1.0
