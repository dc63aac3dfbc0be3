"""Scale: a synthetic day on eight GPUs — file size, writer and reader memory, report and export.

1. Generates a synthetic recording (gpuwhy.recording.synth: constructed data shaped like a
   training run on 8 H100s, one idle; 10 Hz; labelled synthetic in its meta) through the
   writer's bulk path, timed; its size, per stream.
2. Writer memory, first minute to last: an hour (by default) written record by record through
   RecordingWriter.put, as a live sampler does, in a child process that samples its RSS after
   every minute of run time.
3. Reader memory and speed: every GPU sample streamed; the 1-min tier; an exact whole-run
   summary.
4. `gpuwhy report` and `gpuwhy export --perfetto` on the day: wall time and peak RSS (children).

Writes bench/results/scale.md.

    python bench/scale.py [--hours 24] [--gpus 8] [--writer-hours 1] [--out ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NS_PER_S = 1_000_000_000

WRITER_CHILD = """
import json, sys, threading, time
from gpuwhy.recording.synth import synthesize
def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4
marks = []
cpu = {"s": 0.0}
def mark(done, total):
    marks.append(rss_kib())
    for thread in threading.enumerate():  # the writer thread's own CPU time so far
        if thread.name == "gpuwhy-writer" and thread.ident is not None:
            cpu["s"] = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
result = synthesize(sys.argv[1], hours=float(sys.argv[2]), gpus=int(sys.argv[3]),
                    via="records", on_window=mark)
records = result.gpu_samples + result.util_samples + result.host_samples + result.spans
print(json.dumps({"marks": marks, "seconds": result.seconds, "gpu": result.gpu_samples,
                  "writer_cpu_s": cpu["s"], "records": records}))
"""

READER_CHILD = """
import json, sys, time
from gpuwhy.recording import Recording
def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4
out = {"start_kib": rss_kib()}
with Recording.open(sys.argv[1]) as rec:
    started = time.perf_counter()
    count = 0
    for count, _ in enumerate(rec.gpu_samples(), 1):
        if count == 100_000:
            out["early_kib"] = rss_kib()
    out["gpu_samples"] = count
    out["gpu_read_s"] = time.perf_counter() - started
    out["end_kib"] = rss_kib()
    started = time.perf_counter()
    out["minute_buckets"] = sum(1 for _ in rec.gpu_tiers(60 * 10**9))
    out["minute_tier_s"] = time.perf_counter() - started
    started = time.perf_counter()
    out["second_buckets"] = sum(1 for _ in rec.gpu_tiers(10**9, device=0))
    out["second_tier_one_gpu_s"] = time.perf_counter() - started
    started = time.perf_counter()
    summary = rec.gpu_summary()
    out["summary_s"] = time.perf_counter() - started
    out["summary_samples"] = sum(b.samples for b in summary.values())
    low, high = rec.time_range()
    started = time.perf_counter()
    for i in range(100):  # windows of odd lengths at odd places: tiers inside, raw at the edges
        start = low + (high - low) * i // 100 + 123_456_789
        rec.gpu_summary(start, start + 1_234 * 10**9 + 987_654_321)
    out["window_summary_ms"] = (time.perf_counter() - started) * 10
    out["peak_kib"] = __import__("resource").getrusage(0).ru_maxrss
print(json.dumps(out))
"""


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}")


def run_child(command: list[str], timeout_s: float) -> dict[str, object]:
    """Run a command; its wall time, peak RSS (MiB), exit code, output; killed on time-out.

    The peak is the child's own (wait4's rusage), not the maximum over every child so far.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=err)
        code: int | None = None
        peak_kib = 0
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                code = os.waitstatus_to_exitcode(status)
                peak_kib = usage.ru_maxrss
                break
            if time.perf_counter() - started > timeout_s:
                child.kill()
                os.wait4(child.pid, 0)
                break
            time.sleep(0.05)
        wall = time.perf_counter() - started
        child.returncode = code if code is not None else -9  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return {"wall_s": wall, "peak_mib": peak_kib / 1024 if code is not None else None,
                "code": code, "out": out.read().decode(errors="replace"),
                "err": err.read().decode(errors="replace")[-2000:]}


def sizes(path: Path) -> dict[str, int]:
    """Bytes of pages per stream (blocks, tiers, staging) and the rest."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    db.close()
    out: dict[str, int] = {}
    for name, size in rows:
        group = next((g for g in ("gpu_tiers", "util_tiers", "host_tiers", "gpu", "util", "host",
                                  "span") if name.startswith(g)), "other")
        out[group] = out.get(group, 0) + size
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--writer-hours", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=900.0, help="per report run")
    parser.add_argument("--export-timeout", type=float, default=300.0,
                        help="for the export of the whole synthetic run")
    parser.add_argument("--keep", type=Path, help="keep the synthetic recording here")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "scale.md")
    args = parser.parse_args(argv)
    from gpuwhy.recording.synth import synthesize

    py = sys.executable
    with tempfile.TemporaryDirectory() as scratch:
        path = args.keep or Path(scratch, "day.gpuwhy.db")
        if path.exists():
            path.unlink()
        print(f"generating {args.hours} h × {args.gpus} GPUs ...", flush=True)
        result = synthesize(path, hours=args.hours, gpus=args.gpus, seed=0)
        size = path.stat().st_size
        parts = sizes(path)
        print(f"  {size / 1e6:.1f} MB in {result.seconds:.0f} s", flush=True)

        print(f"writer memory over {args.writer_hours} h via RecordingWriter.put ...", flush=True)
        writer = run_child([py, "-c", WRITER_CHILD, str(Path(scratch, "w.gpuwhy.db")),
                            str(args.writer_hours), str(args.gpus)], args.timeout)
        written = json.loads(str(writer["out"])) if writer["code"] == 0 else {}
        marks = written.get("marks", [])
        print("reader ...", flush=True)
        reader_run = run_child([py, "-c", READER_CHILD, str(path)], args.timeout)
        reader = json.loads(str(reader_run["out"])) if reader_run["code"] == 0 else {}
        print("gpuwhy report ...", flush=True)
        report = run_child([py, "-m", "gpuwhy", "report", str(path)], args.timeout)
        report_json = run_child([py, "-m", "gpuwhy", "report", "--json", str(path)],
                                args.timeout)
        print("gpuwhy export ...", flush=True)
        trace = Path(scratch, "trace.json")
        export = run_child([py, "-m", "gpuwhy", "export", str(path), "--perfetto", str(trace)],
                           args.export_timeout)
        trace_mb = trace.stat().st_size / 1e6 if trace.exists() else None
        trace.unlink(missing_ok=True)
        hour_trace = Path(scratch, "hour.json")
        hour_export = run_child([py, "-m", "gpuwhy", "export", str(Path(scratch, "w.gpuwhy.db")),
                                 "--perfetto", str(hour_trace)], args.timeout)
        hour_mb = hour_trace.stat().st_size / 1e6 if hour_trace.exists() else None

    def outcome(run: dict[str, object]) -> str:
        if run["code"] is None:
            return f"did not finish in {run['wall_s']:.0f} s (stopped)"
        peak = run["peak_mib"]
        text = f"{run['wall_s']:.1f} s, peak RSS {peak:.0f} MiB" if peak else \
            f"{run['wall_s']:.1f} s"
        return text if run["code"] in (0, 1) else f"{text}, exit {run['code']}: {run['err']}"

    samples = result.gpu_samples
    lines = [
        "# Scale: a synthetic day on eight GPUs",
        "",
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC} with "
        f"`python bench/scale.py --hours {args.hours:g} --gpus {args.gpus}` on {machine()}.",
        "",
        f"Data: synthetic (constructed, shaped like a Keras training run on {args.gpus} H100s, "
        f"one idle; gpuwhy.recording.synth, seed 0): {args.hours:g} h at 10 Hz — "
        f"{samples:,} GPU samples, {result.util_samples:,} buffered utilization samples, "
        f"{result.host_samples:,} host samples, {result.spans:,} spans.",
        "",
        "| measure | value |",
        "|---|---|",
        f"| generation (bulk path, tiers included) | {result.seconds:.0f} s |",
        f"| file size | {size / 1e6:.1f} MB ({size / samples:.1f} bytes per GPU sample, "
        "everything included) |",
    ]
    for group in ("gpu", "gpu_tiers", "util", "util_tiers", "host", "host_tiers", "span",
                  "other"):
        if group in parts:
            lines.append(f"| — {group.replace('_', ' ')} | {parts[group] / 1e6:.1f} MB |")
    if len(marks) >= 20:
        # Warm-up (SQLite's page cache, the open windows, the generator's noise tables) ends
        # within the first minutes; growth after minute 10 is what would show a leak.
        growth = (marks[-1] - marks[9]) / (len(marks) - 10) * 60
        lines.append(f"| writer RSS via `RecordingWriter.put`, {args.writer_hours:g} h: after "
                     f"minute 1 / 10 / {len(marks)} | {marks[0] / 1024:.1f} / "
                     f"{marks[9] / 1024:.1f} / {marks[-1] / 1024:.1f} MiB (after warm-up: "
                     f"{growth:+.0f} KiB per hour) |")
    elif marks:
        lines.append(f"| writer RSS via `RecordingWriter.put`: after minute 1 / "
                     f"{len(marks)} | {marks[0] / 1024:.1f} / {marks[-1] / 1024:.1f} MiB |")
    else:
        lines.append(f"| writer RSS | failed: {writer['err']} |")
    if written.get("writer_cpu_s"):
        cpu_s = written["writer_cpu_s"]
        lines.append(f"| writer thread CPU for {args.writer_hours:g} h of run "
                     f"({written['records']:,} records) | {cpu_s:.1f} s: "
                     f"{100 * cpu_s / (args.writer_hours * 3600):.2f} % of one core in real "
                     f"time, {cpu_s / written['records'] * 1e6:.1f} µs per record |")
    if reader:
        lines += [
            f"| read every GPU sample (streamed objects) | {reader['gpu_read_s']:.1f} s "
            f"({reader['gpu_samples'] / reader['gpu_read_s']:,.0f} samples/s) |",
            f"| reader RSS after 100k samples / at the end | "
            f"{reader.get('early_kib', reader['start_kib']) / 1024:.1f} / "
            f"{reader['end_kib'] / 1024:.1f} MiB |",
            f"| 1-min tier, all GPUs ({reader['minute_buckets']:,} buckets) | "
            f"{reader['minute_tier_s']:.2f} s |",
            f"| 1-s tier, one GPU ({reader['second_buckets']:,} buckets) | "
            f"{reader['second_tier_one_gpu_s']:.2f} s |",
            f"| exact whole-run summary, all GPUs (`gpu_summary`) | {reader['summary_s']:.2f} s |",
            f"| exact summary of a 20-min window at odd edges | "
            f"{reader['window_summary_ms']:.0f} ms |",
        ]
    else:
        lines.append(f"| reader | failed: {reader_run['err']} |")
    lines += [
        f"| `gpuwhy report` (terminal) | {outcome(report)} |",
        f"| `gpuwhy report --json` | {outcome(report_json)} |",
        f"| `gpuwhy export --perfetto`, the whole run | {outcome(export)}"
        f"{f', {trace_mb:.0f} MB trace' if trace_mb else ''} |",
        f"| `gpuwhy export --perfetto`, the {args.writer_hours:g} h recording of step 2 | "
        f"{outcome(hour_export)}{f', {hour_mb:.0f} MB trace' if hour_mb else ''} |",
        "",
        "Goals (issue): a few hundred MB at most; memory flat from the first minute to the last; "
        "`gpuwhy report` under 10 s and 1 GB.",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
