"""A writer killed with SIGKILL leaves a readable file; long recordings read in flat memory."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpuwhy.recording import Recording

# A real recording process: samples every 10 ms (constructed values), commits every second.
WRITER_CHILD = textwrap.dedent("""
    import sys, time
    from gpuwhy.model import GpuSample, HostSample
    from gpuwhy.recording import RecordingWriter
    writer = RecordingWriter(sys.argv[1], flush_interval_s=1.0)
    start = time.monotonic_ns()
    announced = False
    i = 0
    while True:
        now = time.monotonic_ns()
        writer.put(GpuSample(now, 0, util_gpu_pct=i % 101))
        writer.put(HostSample(now, cpu_system_pct=1.5))
        i += 1
        if not announced and now - start > 2_500_000_000:
            print("recording", flush=True)
            announced = True
        time.sleep(0.01)
""")


@pytest.mark.slow
def test_sigkill_loses_at_most_the_last_second(tmp_path: Path) -> None:
    path = tmp_path / "killed.gpuwhy.db"
    with subprocess.Popen(
        [sys.executable, "-c", WRITER_CHILD, str(path)], stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "recording"
            time.sleep(0.6)  # kill somewhere between two commits
            killed_ns = time.monotonic_ns()
            os.kill(child.pid, signal.SIGKILL)
            assert child.wait(timeout=10) == -signal.SIGKILL
        finally:
            if child.poll() is None:
                child.kill()
    # CLOCK_MONOTONIC is one clock for every process of the machine: times compare directly.
    with Recording.open(path) as rec:
        assert not rec.complete
        times = [s.t_ns for s in rec.gpu_samples()]
        assert len(times) > 150
        lost_s = (killed_ns - times[-1]) / 1e9
        assert 0 <= lost_s <= 1.25, f"lost {lost_s:.2f} s before the kill"
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert max(gaps) < 0.2e9  # nothing missing in what was committed
        assert len(list(rec.host_samples())) == len(times)


# Writes N constructed samples through RecordingWriter and reads them back streamed; reports the
# peak RSS (ru_maxrss, KiB) at checkpoints, so growth between checkpoints is what the code holds.
MEMORY_CHILD = textwrap.dedent("""
    import json, os, resource, sys
    from gpuwhy.model import GpuSample
    from gpuwhy.recording import Recording, RecordingWriter
    path, total = sys.argv[1], int(sys.argv[2])
    peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = {}
    writer = RecordingWriter(path)
    t = 0
    for chunk in range(total // 100_000):
        for i in range(100_000):
            t += 100_000_000 // 8
            writer.put(GpuSample(t, i % 8, util_gpu_pct=i % 101, memory_used_bytes=40 << 30,
                                 sm_clock_mhz=1980, power_mw=300_000 + i % 1000,
                                 temperature_c=70, pcie_gen=5, pcie_width=16))
        writer.flush()
        if chunk == 1:
            report["write_early_kib"] = peak()
    writer.close()
    report["write_end_kib"] = peak()
    report["size_bytes"] = os.path.getsize(path)
    with Recording.open(path) as rec:
        count = 0
        for sample in rec.gpu_samples():
            count += 1
            if count == 200_000:
                report["read_early_kib"] = peak()
        report["read_end_kib"] = peak()
        report["count"] = count
        # One device over a tenth of the run: a range seek, not a scan from the start.
        report["device_range"] = sum(1 for _ in rec.gpu_samples(device=3, start_ns=t * 9 // 10))
    print(json.dumps(report))
""")


@pytest.mark.slow
def test_two_million_samples_write_and_read_in_flat_memory(tmp_path: Path) -> None:
    total = 2_000_000
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD, str(tmp_path / "long.db"), str(total)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(out.stdout)
    assert report["count"] == total and report["device_range"] == total // 80
    # A list of 2 M samples would take hundreds of MB; streaming holds a few pages and a row.
    assert report["write_end_kib"] - report["write_early_kib"] < 40 * 1024, report
    assert report["read_end_kib"] - report["read_early_kib"] < 20 * 1024, report
    assert report["size_bytes"] < 60 * total, report  # compact: well under 60 bytes per row here
