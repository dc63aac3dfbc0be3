"""What `--metrics` costs: a scrape, and the live diagnosis behind the findings gauges.

1. A recording to stand for a running job: a synthetic hour on 8 GPUs at 10 Hz
   (tests/support/synth, labelled synthetic in its meta), or `--recording PATH`.
2. A scrape: the collector fed as `gpuwhy run` feeds it (the sampler's newest reading of each
   GPU, a StepMeter that has seen every span and process event of the recording), rendered to
   the text format by prometheus_client, `--scrapes` times; the median.
3. The live diagnosis: `LiveDiagnosis.diagnose_now()` on the recording, `--repeat` times; the
   median, the wait the policy then leaves before the next one, and the share of one core that
   makes (report/prometheus.py: at least 30x the diagnosis, at least 5 s).

    python bench/metrics_cost.py [--hours 1] [--gpus 8] [--repeat 3] [--out ...]
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import tempfile
import time
from pathlib import Path

import machine

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the synthetic recording generator


def main() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from gpuwhy.model import GpuSample
    from gpuwhy.recording import Recording
    from gpuwhy.report.prometheus import (
        LIVE_DIAGNOSIS_COST_SHARE,
        LIVE_DIAGNOSIS_EVERY_S,
        GpuwhyCollector,
        LiveDiagnosis,
        LiveSources,
    )
    from gpuwhy.runtime.progress import StepMeter

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scrapes", type=int, default=200)
    parser.add_argument("--recording", type=Path)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "metrics_cost.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuwhy-metrics-") as tmp:
        path = args.recording
        if path is None:
            from support.synth import synthesize

            path = Path(tmp) / "run.gpuwhy.db"
            synthesize(path, hours=args.hours, gpus=args.gpus)
        with Recording.open(path) as recording:
            end = recording.run_bounds()[1]  # type: ignore[index]
            meter = StepMeter(clock=lambda: end)
            for span in recording.spans():
                meter.observe(span)
            for event in recording.events():
                meter.observe(event)
            devices = list(recording.devices)
            latest: dict[int, GpuSample] = {}
            for sample in recording.gpu_samples(end - 2_000_000_000, end):
                latest[sample.device] = sample
        live = LiveDiagnosis(path)
        sources = LiveSources(
            devices=lambda: devices,
            gpus=lambda: latest,
            processes=meter.processes,
            findings=lambda: live.findings,
        )
        registry = CollectorRegistry(auto_describe=False)
        registry.register(GpuwhyCollector(sources, run="bench", hostname="bench"))
        diagnoses = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            live.diagnose_now()
            diagnoses.append(time.perf_counter() - started)
        assert live.diagnosed == args.repeat, "the live diagnosis failed"
        scrapes = []
        for _ in range(args.scrapes):
            started = time.perf_counter()
            body = generate_latest(registry)
            scrapes.append(time.perf_counter() - started)
    diagnosis_s = statistics.median(diagnoses)
    wait_s = max(LIVE_DIAGNOSIS_EVERY_S, diagnosis_s / LIVE_DIAGNOSIS_COST_SHARE)
    lines = [
        "# What --metrics costs",
        "",
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC with "
        f"`python bench/metrics_cost.py --hours {args.hours:g} --gpus {args.gpus}` on "
        f"{machine.describe()}. The job: a synthetic {args.hours:g} h recording of "
        f"{args.gpus} GPUs at 10 Hz.",
        "",
        "| what | time | |",
        "|---|---|---|",
        f"| one scrape ({len(body) / 1024:.1f} KiB of text, {args.gpus} GPUs) | "
        f"{statistics.median(scrapes) * 1000:.2f} ms | median of {args.scrapes} |",
        f"| one live diagnosis of the recording | {diagnosis_s:.2f} s | median of {args.repeat} |",
        f"| the wait before the next one | {wait_s:.1f} s | at least 30x the diagnosis, 5 s |",
        f"| the live findings' share of one core | {diagnosis_s / (diagnosis_s + wait_s):.1%} | "
        "diagnosis / (diagnosis + wait) |",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
