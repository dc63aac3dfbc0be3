"""Synthetic recordings: N hours × G GPUs at a given rate, shaped like a real training run.

For tests and benchmarks of scale (a day on eight GPUs) on machines without GPUs. The data is
constructed (shapes.py says how) and labelled so in the recording's meta ("synthetic").
It is written through the real writer: `via="bulk"` hands each storage slot of samples to the writer
as columns (`RecordingWriter.put_block`: same blocks, tiers and schema, no per-sample objects:
a day of 8 GPUs in a few minutes), `via="records"` puts every sample as a record like a live
sampler does (slower; used to measure the writer itself). Spans and events are put as records in
both. The same seed gives the same recording either way.

    PYTHONPATH=tests python -m support.synth OUT.gpuwhy.db [--hours 24] [--gpus 8] [--rate 10]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpuwhy.model import (
    NS_PER_S,
    DeviceInfo,
    Event,
    GpuSample,
    HostSample,
    Span,
    UtilKind,
    UtilSample,
)
from gpuwhy.recording.streams import SLOT_NS, Column
from gpuwhy.recording.writer import RecordingWriter
from support.synth import signals
from support.synth.shapes import Timeline

DEFAULT_START_NS = 302_400 * NS_PER_S  # a monotonic clock three and a half days after boot
H100 = dict(
    name="NVIDIA H100 80GB HBM3",
    memory_total_bytes=85_520_809_984,
    compute_capability=(9, 0),
    sm_clock_max_mhz=1980,
    power_limit_mw=700_000,
    pcie_gen_max=5,
    pcie_width_max=16,
    mig_mode=False,
    gpm_supported=True,
)


@dataclass(frozen=True)
class SynthResult:
    """What was written."""

    path: str
    hours: float
    gpus: int
    rate_hz: float
    seed: int
    gpu_samples: int
    util_samples: int
    host_samples: int
    spans: int
    seconds: float


def devices(count: int) -> list[DeviceInfo]:
    """`count` H100s as NVML would describe them (constructed identities)."""
    return [
        DeviceInfo(
            index=i,
            uuid=f"GPU-5e1f0000-0000-4000-8000-{i:012x}",
            pci_bus_id=f"00000000:{0x18 + 0x10 * i:02X}:00.0",
            **H100,
        )  # type: ignore[arg-type]
        for i in range(count)
    ]


def synthesize(
    path: str | os.PathLike[str],
    *,
    hours: float = 24.0,
    gpus: int = 8,
    rate_hz: float = 10.0,
    seed: int = 0,
    via: str = "bulk",
    start_ns: int = DEFAULT_START_NS,
    on_slot: Callable[[int, int], None] | None = None,
) -> SynthResult:
    """Write a synthetic recording to a new file `path` (RecordingError if it exists).

    `on_slot(done, total)` is called after each minute of run time has been handed over
    (benchmarks sample memory there).
    """
    if via not in ("bulk", "records"):
        raise ValueError("via is 'bulk' or 'records'")
    if hours <= 0 or gpus < 1 or rate_hz <= 0:
        raise ValueError("hours and rate must be positive, gpus at least 1")
    started = time.perf_counter()
    end_ns = start_ns + int(hours * 3600 * NS_PER_S)
    writer = RecordingWriter(path)
    writer.set_meta(
        "synthetic",
        {
            "generator": "tests/support/synth",
            "seed": seed,
            "hours": hours,
            "gpus": gpus,
            "rate_hz": rate_hz,
            "note": "constructed data shaped like a training run, not measured",
        },
    )
    for name, value in (
        ("command", ["python", "train.py", "--synthetic"]),
        ("start_ns", start_ns),
        ("end_ns", end_ns),
        ("start_wall_s", 1_767_225_600.0),
        ("exit_code", 0),
        ("hostname", "synthetic-node"),
        ("interval_s", 1 / rate_hz),
        ("python", None),
        ("environment", {}),
        ("dropped", 0),
    ):
        writer.set_meta(name, value)
    writer.add_devices(devices(gpus))
    writer.put(Event(start_ns, "child_started", "command started", {"pid": 4242}))
    writer.put(
        Event(
            start_ns + 40 * NS_PER_S,
            "hooks",
            "Keras loop ran",
            {"key": "keras.loop", "framework": "keras"},
        )
    )
    timeline = Timeline(start_ns, end_ns, seed)
    signal = signals.Signals(timeline, gpus, rate_hz, seed)
    counts = {"gpu": 0, "util": 0, "host": 0, "spans": 0}
    first, last = start_ns // SLOT_NS, (end_ns - 1) // SLOT_NS
    for slot in range(first, last + 1):
        low, high = max(start_ns, slot * SLOT_NS), min(end_ns, (slot + 1) * SLOT_NS)
        blocks = signal.slot(low, high)
        for stream, key, columns in blocks:
            counts[stream] += len(columns[0])
            if via == "bulk":
                writer.put_block(stream, key, slot, columns)
            else:
                _put_records(writer, stream, columns)
        for span in timeline.advance(high):
            writer.put(Span(span.phase, span.kind, span.start_ns, span.end_ns, span.step, pid=4242))
            counts["spans"] += 1
        if (slot - first) % 10 == 9 or via == "records":
            writer.flush()  # bounds the queue: the generator is far faster than real time
        if on_slot is not None:
            on_slot(slot - first + 1, last - first + 1)
    writer.put(Event(end_ns - NS_PER_S, "child_exited", "command ended", {"exit_code": 0}))
    writer.close()
    if writer.error is not None or writer.dropped:
        raise RuntimeError(f"the writer failed: {writer.error or f'{writer.dropped} dropped'}")
    return SynthResult(
        os.fspath(path),
        hours,
        gpus,
        rate_hz,
        seed,
        counts["gpu"],
        counts["util"],
        counts["host"],
        counts["spans"],
        time.perf_counter() - started,
    )


def _put_records(writer: RecordingWriter, stream: str, columns: list[Column]) -> None:
    put = writer.put
    if stream == "gpu":
        for row in zip(*columns, strict=True):
            put(GpuSample(*row))
    elif stream == "util":
        for t_ns, device, kind, value in zip(*columns, strict=True):
            put(UtilSample(t_ns, device, UtilKind(kind), value))
    else:
        for t_ns, cpu, job_cpu, rss, processes, available in zip(*columns, strict=True):
            put(HostSample(t_ns, cpu / 10, job_cpu / 10, rss, processes, available))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a synthetic gpuwhy recording.")
    parser.add_argument("out", help="the new recording file")
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--rate", type=float, default=10.0, help="samples per second per GPU")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--via", choices=("bulk", "records"), default="bulk")
    args = parser.parse_args(argv)
    result = synthesize(
        args.out, hours=args.hours, gpus=args.gpus, rate_hz=args.rate, seed=args.seed, via=args.via
    )
    size = os.path.getsize(result.path)
    print(
        f"wrote {result.path}: {size / 1e6:.1f} MB, {result.gpu_samples:,} GPU samples, "
        f"{result.util_samples:,} buffered samples, {result.spans:,} spans "
        f"in {result.seconds:.1f} s"
    )
    return 0
