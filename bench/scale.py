"""Scale: a synthetic day on eight GPUs — file size, writer and reader memory, report and export.

1. Generates a synthetic recording (tests/support/synth: constructed data shaped like a
   training run on 8 H100s, one idle; 10 Hz; labelled synthetic in its meta) through the
   writer's bulk path, timed; its size, per stream. `--recording PATH` reuses one made before.
2. Writer memory, first minute to last: an hour (by default) written record by record through
   RecordingWriter.put, as a live sampler does, in a child process that samples its RSS after
   every minute of run time.
3. Reader memory and speed: every GPU sample streamed; the 1-min tier; an exact whole-run
   summary; exact summaries of every segment between the run's phase boundaries.
4. `gpuwhy report` (terminal, --json, --html) and `gpuwhy export --perfetto` (the whole run and
   windows of it) on the day: wall time, CPU time (user + system) and peak RSS of each child,
   best of `--repeat` runs (other work on a shared machine slows wall time; CPU time less so).
   The terminal and HTML reports run alternately with their worker processes and in one
   process (GPUWHY_WORKERS=0; src/gpuwhy/analysis/workers.py), side by side.
5. Shorter recordings (`--small-hours`, 2 h and 4 h of as many GPUs), around the size from which
   gpuwhy starts workers: their report with workers forced and without, alternated.

Writes bench/results/scale.md.

    python bench/scale.py [--hours 24] [--gpus 8] [--writer-hours 1] [--repeat 2]
                          [--small-hours 2 4] [--out ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import machine

HERE = Path(__file__).resolve().parent
# The synthetic recording generator is test support, outside the installed package.
TESTS = HERE.parent / "tests"
sys.path.insert(0, str(TESTS))

WRITER_CHILD = (
    f"import sys; sys.path.insert(0, {str(TESTS)!r})"
    + """
import json, threading, time
from support.synth import synthesize
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
                    via="records", on_slot=mark)
records = result.gpu_samples + result.util_samples + result.host_samples + result.spans
print(json.dumps({"marks": marks, "seconds": result.seconds, "gpu": result.gpu_samples,
                  "writer_cpu_s": cpu["s"], "records": records}))
"""
)

READER_CHILD = """
import json, sys, time
from gpuwhy.recording import Recording
from gpuwhy.analysis.phases import recording_phase_stats
from gpuwhy.analysis.alignment import segment_windows
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
    start_ns, end_ns = rec.meta.get("start_ns", low), rec.meta.get("end_ns", high)
    started = time.perf_counter()
    phases = recording_phase_stats(rec, start_ns, end_ns)
    out["phases_s"] = time.perf_counter() - started
    out["steps"] = sum(p.steps for p in phases.values())
    windows = {name: list(p.intervals) for name, p in phases.items()}
    windows["_run"] = [(start_ns, end_ns)]
    points, _ = segment_windows(windows)
    started = time.perf_counter()
    rec.gpu_segments(points)
    out["segments_s"] = time.perf_counter() - started
    out["segments"] = len(points) - 1
    out["cut_minutes"] = len({p // (60 * 10**9) for p in points if p % (60 * 10**9)})
    out["peak_kib"] = __import__("resource").getrusage(0).ru_maxrss
print(json.dumps(out))
"""


def _peak_kib(pid: int) -> int:
    """A process's VmHWM (0 once it is gone, or without /proc)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _workers(pid: int) -> list[int]:
    """The worker processes a report started (multiprocessing's spawned children; not its
    resource tracker)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    found = []
    for child in map(int, children):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in command:
            found.append(child)
    return found


def run_child(
    command: list[str], timeout_s: float, env: dict[str, str] | None = None
) -> dict[str, object]:
    """Run a command; its wall time, CPU time (user + system), peak RSS (MiB), exit code and
    output; killed on time-out.

    Times are the child's own (wait4's rusage), which includes the processes it started and
    waited for (a report's workers). The peak RSS is its VmHWM, read every 20 ms while it
    runs: rusage's maximum would include the pages of this process, which the child shares
    between fork and exec (a benchmark that generated a day in memory shows as ~70 MiB). The
    processes it started are followed too: `workers` (how many) and `worker_peak_mib` (the
    largest).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        code: int | None = None
        peak_kib = 0
        cpu_s = None
        worker_kib: dict[int, int] = {}
        while True:
            peak_kib = max(peak_kib, _peak_kib(child.pid))
            for worker in _workers(child.pid):
                worker_kib[worker] = max(worker_kib.get(worker, 0), _peak_kib(worker))
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                code = os.waitstatus_to_exitcode(status)
                peak_kib = peak_kib or usage.ru_maxrss
                cpu_s = usage.ru_utime + usage.ru_stime
                break
            if time.perf_counter() - started > timeout_s:
                child.kill()
                os.wait4(child.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - started
        child.returncode = code if code is not None else -9  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return {
            "wall_s": wall,
            "cpu_s": cpu_s,
            "peak_mib": peak_kib / 1024 if code is not None else None,
            "workers": len(worker_kib),
            "worker_peak_mib": max(worker_kib.values(), default=0) / 1024,
            "code": code,
            "out": out.read().decode(errors="replace"),
            "err": err.read().decode(errors="replace")[-2000:],
        }


def best_of(
    command: list[str], timeout_s: float, repeat: int, env: dict[str, str] | None = None
) -> dict[str, object]:
    """`run_child` `repeat` times: the least wall and CPU time, the largest peak RSS."""
    return _best([run_child(command, timeout_s, env) for _ in range(max(repeat, 1))])


def _best(runs: list[dict[str, object]]) -> dict[str, object]:
    done = [r for r in runs if r["code"] is not None]
    if not done:
        return runs[0]
    best = dict(min(done, key=lambda r: float(r["wall_s"])))  # type: ignore[arg-type]
    best["cpu_s"] = min(float(r["cpu_s"]) for r in done)  # type: ignore[arg-type]
    for key in ("peak_mib", "worker_peak_mib"):
        best[key] = max(float(r[key]) for r in done)  # type: ignore[arg-type]
    best["runs"] = len(done)
    return best


def alternated(
    command: list[str], timeout_s: float, repeat: int, workers: str | None = None
) -> tuple[dict[str, object], dict[str, object]]:
    """`command` as gpuwhy runs it (with `workers`: GPUWHY_WORKERS set so) and in one process
    (GPUWHY_WORKERS=0), one after the other `repeat` times: the best of each (see `best_of`)."""
    usual = None if workers is None else dict(os.environ, GPUWHY_WORKERS=workers)
    alone = dict(os.environ, GPUWHY_WORKERS="0")
    runs = [
        (run_child(command, timeout_s, usual), run_child(command, timeout_s, alone))
        for _ in range(max(repeat, 1))
    ]
    return _best([a for a, _ in runs]), _best([b for _, b in runs])


def sizes(path: Path) -> dict[str, int]:
    """Bytes of pages per stream (blocks, tiers, staging) and the rest."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    db.close()
    out: dict[str, int] = {}
    for name, size in rows:
        group = next(
            (
                g
                for g in ("gpu_tiers", "util_tiers", "host_tiers", "gpu", "util", "host", "span")
                if name.startswith(g)
            ),
            "other",
        )
        out[group] = out.get(group, 0) + size
    return out


def outcome(run: dict[str, object], extra: str = "") -> str:
    """One table cell: wall and CPU time, peak RSS (or how it failed)."""
    if run["code"] is None:
        return f"did not finish in {run['wall_s']:.0f} s (stopped)"
    text = (
        f"{run['wall_s']:.1f} s wall, {run['cpu_s']:.1f} s CPU, peak RSS "
        f"{run['peak_mib']:.0f} MiB{extra}"
    )
    return text if run["code"] in (0, 1) else f"{text}, exit {run['code']}: {run['err']}"


def small_lines(
    small: list[tuple[float, int, dict[str, object], dict[str, object]]], gpus: int, repeat: int
) -> list[str]:
    """Shorter recordings' reports with workers forced (GPUWHY_WORKERS) and without."""
    if not small:
        return []
    lines = [
        "The report of a recording of a million GPU samples or more has worker processes "
        "(one per core, up to one per GPU: src/gpuwhy/analysis/workers.py, docs/architecture.md)"
        "; a shorter one is read in one process. Around that size, with the workers forced "
        f"(`GPUWHY_WORKERS`) and without, alternated, best of {repeat} each:",
        "",
        "| recording | GPU samples | in one process | with workers | CPU time, one process / "
        "with workers |",
        "|---|---|---|---|---|",
    ]
    for hours, samples, forced, alone in small:
        lines.append(
            f"| {hours:g} h × {gpus} GPUs | {samples:,} | {float(alone['wall_s']):.2f} s | "  # type: ignore[arg-type]
            f"{float(forced['wall_s']):.2f} s ({forced['workers']} workers) | "  # type: ignore[arg-type]
            f"{float(alone['cpu_s']):.2f} s / {float(forced['cpu_s']):.2f} s |"  # type: ignore[arg-type]
        )
    return [*lines, ""]


def workers_cell(run: dict[str, object]) -> str:
    """The worker processes a run started (analysis/workers.py), if any."""
    if not run.get("workers"):
        return ""
    return (
        f"; {run['workers']} worker processes (peak RSS of the largest "
        f"{run['worker_peak_mib']:.0f} MiB)"
    )


def ratio_cell(run: dict[str, object], alone: dict[str, object]) -> str:
    """Wall time with workers over wall time without, measured alternately."""
    if run["code"] is None or alone["code"] is None:
        return ""
    return f"; with workers / alone: {float(run['wall_s']) / float(alone['wall_s']):.2f}"  # type: ignore[arg-type]


def trace_facts(path: Path, run: dict[str, object]) -> str:
    """Size and event count of an exported trace, and what it holds (its otherData)."""
    if not path.exists() or run["code"] != 0:
        return ""
    size = path.stat().st_size
    events = str(run["out"]).split(":", 1)[-1].split("trace events")[0].strip()
    with path.open("rb") as handle:  # otherData is at the end of the file
        handle.seek(max(size - 4000, 0))
        tail = handle.read().decode(errors="replace")
    counters = tail.split('"counters":', 1)[-1].split('"', 2)[1] if '"counters"' in tail else "?"
    path.unlink()
    return f"; {size / 1e6:.0f} MB, {events} events; counters: {counters}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--writer-hours", type=float, default=1.0)
    parser.add_argument(
        "--small-hours",
        type=float,
        nargs="*",
        default=[2.0, 4.0],
        help="shorter recordings (as many GPUs) whose report runs with workers forced and "
        "without, around the size from which gpuwhy starts them",
    )
    parser.add_argument("--repeat", type=int, default=2, help="runs of each report and export")
    parser.add_argument("--timeout", type=float, default=900.0, help="per child process")
    parser.add_argument("--keep", type=Path, help="keep the synthetic recording here")
    parser.add_argument(
        "--recording",
        type=Path,
        help="measure this synthetic recording (made by an earlier run with "
        "--keep, or by PYTHONPATH=tests python -m support.synth) instead of "
        "generating one",
    )
    parser.add_argument("--out", type=Path, default=HERE / "results" / "scale.md")
    args = parser.parse_args(argv)
    from gpuwhy.recording import Recording
    from support.synth import synthesize

    py = sys.executable
    load_before = machine.load()
    with tempfile.TemporaryDirectory() as scratch:
        if args.recording:
            path = args.recording
            with Recording.open(path) as rec:
                synthetic = rec.meta.get("synthetic") or {}
            args.hours, args.gpus = (
                synthetic.get("hours", args.hours),
                synthetic.get("gpus", args.gpus),
            )
            generated = None
            print(f"measuring {path} ({args.hours} h × {args.gpus} GPUs)", flush=True)
        else:
            path = args.keep or Path(scratch, "day.gpuwhy.db")
            if path.exists():
                path.unlink()
            print(f"generating {args.hours} h × {args.gpus} GPUs ...", flush=True)
            generated = synthesize(path, hours=args.hours, gpus=args.gpus, seed=0)
            print(f"  {path.stat().st_size / 1e6:.1f} MB in {generated.seconds:.0f} s", flush=True)
        size = path.stat().st_size
        parts = sizes(path)
        with Recording.open(path) as rec:
            counts = {
                stream: rec.rows_at_most(stream) for stream in ("gpu", "util", "host", "span")
            }

        print(f"writer memory over {args.writer_hours} h via RecordingWriter.put ...", flush=True)
        hour_path = Path(scratch, "w.gpuwhy.db")
        writer = run_child(
            [py, "-c", WRITER_CHILD, str(hour_path), str(args.writer_hours), str(args.gpus)],
            args.timeout,
        )
        written = json.loads(str(writer["out"])) if writer["code"] == 0 else {}
        marks = written.get("marks", [])
        print("reader ...", flush=True)
        reader_run = run_child([py, "-c", READER_CHILD, str(path)], args.timeout)
        reader = json.loads(str(reader_run["out"])) if reader_run["code"] == 0 else {}

        print("gpuwhy report ...", flush=True)
        gpuwhy = [py, "-m", "gpuwhy"]
        report, report_alone = alternated([*gpuwhy, "report", str(path)], args.timeout, args.repeat)
        report_json = best_of([*gpuwhy, "report", "--json", str(path)], args.timeout, args.repeat)
        html = Path(scratch, "day.html")
        report_html, html_alone = alternated(
            [*gpuwhy, "report", "--html", str(html), str(path)], args.timeout, args.repeat
        )
        html_mb = html.stat().st_size / 1e6 if html.exists() else None

        print("gpuwhy export ...", flush=True)
        trace = Path(scratch, "trace.json")
        exports = []
        hours = args.hours
        windows = [("the whole run", [])]
        if hours * 3600 > 4200:
            windows += [("10 min (--start 3600 --end 4200)", ["--start", "3600", "--end", "4200"])]
        if hours * 3600 > 7200:
            windows += [("1 h (--start 3600 --end 7200)", ["--start", "3600", "--end", "7200"])]
        for label, window in windows:
            run = best_of(
                [*gpuwhy, "export", str(path), "--perfetto", str(trace), *window],
                args.timeout,
                args.repeat,
            )
            exports.append((label, run, trace_facts(trace, run)))
        hour_run = best_of(
            [*gpuwhy, "export", str(hour_path), "--perfetto", str(trace)], args.timeout, 1
        )
        hour_facts = trace_facts(trace, hour_run)
        small = []
        for hours in args.small_hours:
            print(f"a {hours:g} h recording, with workers and without ...", flush=True)
            small_path = Path(scratch, f"small-{hours:g}.gpuwhy.db")
            synthesize(small_path, hours=hours, gpus=args.gpus, seed=0)
            with Recording.open(small_path) as rec:
                small_samples = rec.rows_at_most("gpu")
            forced, alone = alternated(
                [*gpuwhy, "report", str(small_path)],
                args.timeout,
                max(args.repeat, 3),
                workers=str(min(args.gpus, os.cpu_count() or 1)),
            )
            small.append((hours, small_samples, forced, alone))
            small_path.unlink()
    load_after = machine.load()

    samples = counts["gpu"]
    lines = [
        "# Scale: a synthetic day on eight GPUs",
        "",
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC} with "
        f"`python bench/scale.py --hours {args.hours:g} --gpus {args.gpus}` on "
        f"{machine.describe()}, SQLite {sqlite3.sqlite_version}. Load average (1/5/15 min) "
        f"{load_before} before, {load_after} after: other work on this shared machine slows "
        "wall times; CPU times (user + system of the measured process) vary less.",
        "",
        f"Data: synthetic (constructed, shaped like a Keras training run on {args.gpus} H100s, "
        f"one idle; tests/support/synth, seed 0): {args.hours:g} h at 10 Hz — "
        f"{samples:,} GPU samples, {counts['util']:,} buffered utilization samples, "
        f"{counts['host']:,} host samples, {counts['span']:,} spans.",
        "",
        "| measure | value |",
        "|---|---|",
    ]
    if generated is not None:
        lines.append(f"| generation (bulk path, tiers included) | {generated.seconds:.0f} s |")
    lines.append(
        f"| file size | {size / 1e6:.1f} MB ({size / samples:.1f} bytes per GPU "
        "sample, everything included) |"
    )
    for group in ("gpu", "gpu_tiers", "util", "util_tiers", "host", "host_tiers", "span", "other"):
        if group in parts:
            lines.append(f"| — {group.replace('_', ' ')} | {parts[group] / 1e6:.1f} MB |")
    if len(marks) >= 20:
        # Warm-up (SQLite's page cache, the open windows, the generator's noise tables) ends
        # within the first minutes; growth after minute 10 is what would show a leak.
        growth = (marks[-1] - marks[9]) / (len(marks) - 10) * 60
        lines.append(
            f"| writer RSS via `RecordingWriter.put`, {args.writer_hours:g} h: after "
            f"minute 1 / 10 / {len(marks)} | {marks[0] / 1024:.1f} / "
            f"{marks[9] / 1024:.1f} / {marks[-1] / 1024:.1f} MiB (after warm-up: "
            f"{growth:+.0f} KiB per hour) |"
        )
    elif marks:
        lines.append(
            f"| writer RSS via `RecordingWriter.put`: after minute 1 / "
            f"{len(marks)} | {marks[0] / 1024:.1f} / {marks[-1] / 1024:.1f} MiB |"
        )
    else:
        lines.append(f"| writer RSS | failed: {writer['err']} |")
    if written.get("writer_cpu_s"):
        cpu_s = written["writer_cpu_s"]
        lines.append(
            f"| writer thread CPU for {args.writer_hours:g} h of run "
            f"({written['records']:,} records) | {cpu_s:.1f} s: "
            f"{100 * cpu_s / (args.writer_hours * 3600):.2f} % of one core in real "
            f"time, {cpu_s / written['records'] * 1e6:.1f} µs per record |"
        )
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
            f"| phase statistics of {reader['steps']:,} steps from the span columns "
            f"(`recording_phase_stats`) | {reader['phases_s']:.2f} s |",
            f"| exact summaries of the {reader['segments']:,} segments between phase "
            f"boundaries, all GPUs (`gpu_segments`; {reader['cut_minutes']} minutes cut) | "
            f"{reader['segments_s']:.2f} s |",
        ]
    else:
        lines.append(f"| reader | failed: {reader_run['err']} |")
    lines += [
        f"| `gpuwhy report` (terminal) | {outcome(report)}{workers_cell(report)} |",
        f"| — in one process (`GPUWHY_WORKERS=0`) | {outcome(report_alone)}"
        f"{ratio_cell(report, report_alone)} |",
        f"| `gpuwhy report --json` | {outcome(report_json)}{workers_cell(report_json)} |",
        f"| `gpuwhy report --html` (terminal report too) | {outcome(report_html)}"
        f"{workers_cell(report_html)}{f'; page {html_mb:.2f} MB' if html_mb else ''} |",
        f"| — in one process (`GPUWHY_WORKERS=0`) | {outcome(html_alone)}"
        f"{ratio_cell(report_html, html_alone)} |",
    ]
    for label, run, facts in exports:
        lines.append(f"| `gpuwhy export --perfetto`, {label} | {outcome(run)}{facts} |")
    lines += [
        f"| `gpuwhy export --perfetto`, the {args.writer_hours:g} h recording of step 2 | "
        f"{outcome(hour_run)}{hour_facts} |",
        "",
        f"Report and export times are the best of {args.repeat} runs (peak RSS: the largest); "
        "a report with workers and one without ran one after the other. "
        "Goals (issue): a few hundred MB at most; memory flat from the first minute to the "
        "last; `gpuwhy report` under 3 s and 1 GB; the HTML report under 5 s and 5 MB.",
        "",
        *small_lines(small, args.gpus, max(args.repeat, 3)),
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
