"""Recording size and speed: bytes per GPU sample, write and read throughput.

Writes N GPU samples shaped like an 8-GPU Hopper run at 10 Hz (constructed values, every field
set, realistic magnitudes and variation) through RecordingWriter, then reads them back:
streamed as GpuSample objects, and aggregated per device by SQLite (`gpu_averages`). Writes
bench/results/recording_io.md.

    python bench/recording_io.py [--samples 1000000] [--out bench/results/recording_io.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import machine

from gpuwhy.model import GpuSample, Span, SpanKind
from gpuwhy.recording import Recording, RecordingWriter

GPUS = 8
PERIOD_NS = 100_000_000  # 10 Hz


def samples(count: int, seed: int = 1) -> Iterator[GpuSample]:
    """Constructed samples: busy GPUs with jitter, slowly varying memory, clocks and power."""
    rng = random.Random(seed)
    t = 3 * 10**14  # a monotonic clock three and a half days after boot
    for i in range(count):
        device = i % GPUS
        if device == 0:
            t += PERIOD_NS + rng.randrange(-200_000, 200_000)
        util = min(100, max(0, int(rng.gauss(88, 10))))
        yield GpuSample(
            t_ns=t,
            device=device,
            util_gpu_pct=util,
            util_mem_pct=util // 2,
            memory_used_bytes=(60 << 30) + rng.randrange(64) * (2 << 20),
            sm_clock_mhz=1980 - rng.randrange(4) * 15,
            power_mw=550_000 + rng.randrange(150_000),
            temperature_c=60 + rng.randrange(15),
            pcie_tx_kbps=rng.randrange(2_000_000),
            pcie_rx_kbps=rng.randrange(25_000_000),
            pcie_gen=5,
            pcie_width=16,
            clock_event_reasons=rng.choice((0, 0, 0, 4)),
            sm_active_permille=rng.randrange(600, 1000),
            sm_occupancy_permille=rng.randrange(200, 600),
            tensor_active_permille=rng.randrange(300, 800),
            dram_active_permille=rng.randrange(200, 700),
            job_memory_bytes=(58 << 30) + rng.randrange(64) * (2 << 20),
            job_sm_pct=min(100, util + 2),
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "recording_io.md"))
    args = parser.parse_args(argv)
    n = args.samples
    data = list(samples(n))  # made up front: the writer is timed, not the generator
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.gpuwhy.db"
        writer = RecordingWriter(path)
        started = time.perf_counter()
        for start in range(0, n, 100_000):  # a producer faster than any sampler: let it drain
            for sample in data[start : start + 100_000]:
                writer.put(sample)
            writer.flush()
        writer.close()
        write_s = time.perf_counter() - started
        assert writer.dropped == 0
        size = os.path.getsize(path)
        del data
        with Recording.open(path) as rec:
            started = time.perf_counter()
            count = sum(1 for _ in rec.gpu_samples())
            read_s = time.perf_counter() - started
            started = time.perf_counter()
            one = sum(1 for _ in rec.gpu_samples(device=3, start_ns=None))
            device_s = time.perf_counter() - started
            started = time.perf_counter()
            averages = rec.gpu_averages()
            aggregate_s = time.perf_counter() - started
        assert count == n and one == n // GPUS and len(averages) == GPUS
    per_row = size / n
    spans = n // 7  # a day on 8 GPUs: ~7 M samples and ~1 M step spans
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "spans.gpuwhy.db"
        empty = RecordingWriter(path)
        empty.close()
        empty_size = os.path.getsize(path)
        path.unlink()
        writer = RecordingWriter(path)
        t = 3 * 10**14
        for step in range(spans):  # a data wait and a step, on one of 8 ranks' processes
            t += 86_000_000
            writer.put(
                Span("train", SpanKind.STEP, t, t + 80_000_000, step=step, pid=4000 + step % 8)
            )
            if step % 100_000 == 0:
                writer.flush()
        writer.close()
        span_bytes = (os.path.getsize(path) - empty_size) / spans
        with Recording.open(path) as rec:
            started = time.perf_counter()
            read = sum(1 for _ in rec.spans(kind=SpanKind.STEP, phase="train"))
            span_read_s = time.perf_counter() - started
        assert read == spans
    lines = [
        "# Recording size and speed",
        "",
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC} with "
        f"`python bench/recording_io.py --samples {n}` on {machine.describe()}, "
        f"SQLite {sqlite3.sqlite_version}.",
        "",
        f"Data: {n:,} GPU samples of {GPUS} GPUs at 10 Hz, every field set (constructed values "
        "shaped like a busy Hopper node).",
        "",
        "| measure | value |",
        "|---|---|",
        f"| size | {per_row:.1f} bytes per GPU sample, {per_row:.1f} MB per million |",
        f"| 24 h × 8 GPUs × 10 Hz (6.9 M samples) | {per_row * 6.912e6 / 1e6:.0f} MB |",
        f"| write (put → committed, one writer thread) | {n / write_s:,.0f} samples/s |",
        f"| read, streamed GpuSample objects, all GPUs | {n / read_s:,.0f} samples/s |",
        f"| read, one GPU of {GPUS} | {one / device_s:,.0f} samples/s |",
        f"| per-GPU means of every metric in SQL (`gpu_averages`) | {n / aggregate_s:,.0f} "
        "samples/s |",
        f"| step spans: size ({spans:,} spans) | {span_bytes:.1f} bytes per span |",
        f"| step spans: read, streamed, one phase | {spans / span_read_s:,.0f} spans/s |",
        "",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
