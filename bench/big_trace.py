"""Big traces: `gpuwhy report` on a 1 GB Kineto trace, side by side with HTA on the same file.

The issue's goal: a 1 GB PyTorch profiler trace reported in under 60 s with a peak RSS under
1.5 GB, which needs the reader to stream (Holistic Trace Analysis loads the whole JSON, then a
pandas frame of every event, and runs out of memory on such files).

1. Builds the big trace from a real one (tests/data/traces/kineto-samples/resnet50_num_workers_0
   .1623143566756: ResNet-50 on a V100, 6 ProfilerSteps, 35 MB of JSON): the source's metadata
   (schemaVersion, deviceProperties), `distributedInfo` {"rank": 0, "world_size": 1}, then its
   `traceEvents` repeated until the file reaches `--size-mb` MiB. Copy k is shifted in time by
   k × (the source's span + `--gap-us`); its correlation ids (args `correlation`, the flow
   events' `id`), external ids, autograd sequence numbers and ProfilerStep numbers are offset so
   that they stay unique and consistent; the process/thread metadata events (ph "M") are written
   once. ts/dur stay integers, as in the source. The file is plain JSON (uncompressed, so its
   size is what a reader parses), written event by event (json.dumps per event), into a scratch
   directory outside the repository.
2. Runs, each in a child process of its own: `gpuwhy report TRACE --json` (this Python), and with
   `--hta-python`, HTA's `TraceAnalysis(trace_dir=DIR)` then `get_temporal_breakdown()` (HTA
   0.5.0's defaults; the trace alone in its directory) under an address-space limit
   (`--hta-memory-gb`, RLIMIT_AS) and a time limit (`--hta-timeout`). Both on the 35 MB source
   (decompressed) as the baseline, then on the big file. Each child runs under a small wrapper
   process whose `getrusage(RUSAGE_CHILDREN)` gives the child's own peak RSS and CPU time (a
   child measured from this process would count the pages it shares between fork and exec);
   wall time is the child's, from start to exit.

Writes bench/results/big_trace.md.

    python bench/big_trace.py [--size-mb 1024] [--hta-python /tmp/hta-venv/bin/python]
        [--hta-timeout 600] [--hta-memory-gb 12] [--scratch DIR] [--keep] [--trace BIG.json]
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import machine

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SOURCE = (
    ROOT
    / "tests"
    / "data"
    / "traces"
    / "kineto-samples"
    / "resnet50_num_workers_0.1623143566756.pt.trace.json.gz"
)
GOAL_S = 60.0
GOAL_RSS_BYTES = 1.5e9
MIB = 1 << 20
# Integer ids in args that link events to each other: runtime call ↔ kernel (correlation),
# operator ↔ runtime call (external id), forward ↔ backward operator (sequence number).
ID_ARGS = ("correlation", "external id", "External id", "Sequence number")
_STEP = re.compile(r"^ProfilerStep#(\d+)$")

# Runs one command and reports it as a JSON line on stdout: its exit code (negative: the
# signal), whether it was stopped at the time limit, its wall time, and RUSAGE_CHILDREN — the
# peak RSS and CPU time of the command (and of any process it waited for), not of this wrapper.
# argv: timeout_s, address-space limit in bytes (0: none), stdout file, stderr file, command...
WRAPPER = """
import json, os, resource, signal, subprocess, sys, time
timeout_s, limit, out_path, err_path, command = (
    float(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:])
def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
with open(out_path, "wb") as out, open(err_path, "wb") as err:
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=out, stderr=err, start_new_session=True,
                             preexec_fn=limit_memory if limit else None)
    timed_out = False
    try:
        code = child.wait(timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(child.pid, signal.SIGKILL)
        code = child.wait()
    wall_s = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": code, "timed_out": timed_out, "wall_s": wall_s,
                  "cpu_s": usage.ru_utime + usage.ru_stime, "peak_kib": usage.ru_maxrss}))
"""

# HTA's child: load the trace directory with HTA's defaults, then its temporal breakdown.
# Prints the breakdown (and the time of each stage) as JSON; on failure one line on stderr,
# "HTA-FAILED: <what>", and exit 3.
HTA_CHILD = """
import json, sys, time
stage = "import"
try:
    started = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis
    stage = "TraceAnalysis"
    analysis = TraceAnalysis(trace_dir=sys.argv[1])
    loaded = time.perf_counter()
    stage = "get_temporal_breakdown"
    frame = analysis.get_temporal_breakdown(visualize=False)
    done = time.perf_counter()
    rows = [{k: (v if isinstance(v, (int, str)) else float(v)) for k, v in row.items()}
            for row in frame.to_dict("records")]
    print(json.dumps({"load_s": loaded - started, "breakdown_s": done - loaded, "rows": rows}))
except MemoryError:
    print(f"HTA-FAILED: ran out of memory (MemoryError in {stage})", file=sys.stderr)
    sys.exit(3)
except Exception as exc:
    text = str(exc).strip()
    first = text.splitlines()[0][:160] if text else ""
    print(f"HTA-FAILED: {type(exc).__name__} in {stage}: {first}", file=sys.stderr)
    sys.exit(3)
"""


# --- the big trace -----------------------------------------------------------------------------


def _ids(events: list[dict[str, Any]]) -> dict[str, int]:
    """The stride that keeps each id family unique across copies: its largest value, plus one.
    Flow events' ids are correlation ids in Kineto's traces: they share that family."""
    top = dict.fromkeys(ID_ARGS, 0)
    for event in events:
        args = event.get("args")
        if isinstance(args, dict):
            for key in ID_ARGS:
                value = args.get(key)
                if isinstance(value, int) and value > top[key]:
                    top[key] = value
        if event.get("ph") in ("s", "f", "t") and isinstance(event.get("id"), int):
            top["correlation"] = max(top["correlation"], event["id"])
    return {key: value + 1 for key, value in top.items()}


def _shifted(
    event: dict[str, Any], dt: int, k: int, strides: dict[str, int], step_stride: int
) -> dict[str, Any]:
    """Copy k of one event: later by dt µs, ids and step numbers offset."""
    if k == 0:
        return event
    out = dict(event)
    if "ts" in out:
        out["ts"] = out["ts"] + dt
    if out.get("ph") in ("s", "f", "t") and isinstance(out.get("id"), int):
        out["id"] = out["id"] + k * strides["correlation"]
    args = out.get("args")
    if isinstance(args, dict) and any(key in args for key in ID_ARGS):
        args = out["args"] = dict(args)
        for key in ID_ARGS:
            value = args.get(key)
            if isinstance(value, int) and value > 0:  # 0/-1: no link
                args[key] = value + k * strides[key]
    name = out.get("name")
    if isinstance(name, str) and name.startswith("ProfilerStep#"):
        match = _STEP.match(name)
        if match:
            out["name"] = f"ProfilerStep#{int(match.group(1)) + k * step_stride}"
    return out


def build(path: Path, size_bytes: int, gap_us: int) -> dict[str, Any]:
    """Write the big trace; what it holds (copies, events, steps, size, seconds)."""
    started = time.perf_counter()
    with gzip.open(SOURCE, "rb") as handle:
        source = json.load(handle)
    events: list[dict[str, Any]] = source["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), int)]
    if not timed or any(not isinstance(e.get("dur", 0), int | None) for e in timed):
        sys.exit(f"error: {SOURCE.name} has no integer ts/dur; this builder keeps them integers")
    span_us = max(e["ts"] + (e.get("dur") or 0) for e in timed) - min(e["ts"] for e in timed)
    period_us = span_us + gap_us
    strides = _ids(events)
    steps = sorted(int(m.group(1)) for e in events if (m := _STEP.match(str(e.get("name", "")))))
    step_stride = steps[-1] - steps[0] + 1 if steps else 0
    meta = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]

    head = {k: v for k, v in source.items() if k != "traceEvents"}
    head["distributedInfo"] = {"rank": 0, "world_size": 1}
    written = 0
    count = 0
    copies = 0
    with open(path, "w", encoding="ascii", newline="\n", buffering=1 << 20) as out:
        text = "{\n" + "".join(f"  {json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items())
        text += '  "traceEvents": [\n'
        out.write(text)
        written += len(text)
        separator = "    "
        for event in meta:
            text = separator + json.dumps(event)
            out.write(text)
            written += len(text)
            separator = ",\n    "
            count += 1
        while True:
            before = written
            dt = copies * period_us
            for event in body:
                text = separator + json.dumps(_shifted(event, dt, copies, strides, step_stride))
                out.write(text)
                written += len(text)
                separator = ",\n    "
            count += len(body)
            copies += 1
            if written + (written - before) / 2 >= size_bytes:  # the nearest whole copy
                break
        text = "\n  ]\n}\n"
        out.write(text)
        written += len(text)
    size = path.stat().st_size
    assert size == written, (size, written)
    return {
        "copies": copies,
        "per_copy": len(body),
        "meta_events": len(meta),
        "events": count,
        "steps": len(steps) * copies,
        "step_range": (steps[0], steps[0] + len(steps) * copies - 1) if steps else None,
        "span_s": (copies * period_us - gap_us) / 1e6,
        "source_span_s": span_us / 1e6,
        "size": size,
        "seconds": time.perf_counter() - started,
    }


# --- the children ------------------------------------------------------------------------------


def run_child(
    command: list[str], scratch: Path, tag: str, timeout_s: float, limit_bytes: int = 0
) -> dict[str, Any]:
    """Run `command` under the wrapper: the wrapper's report, plus the child's stdout/stderr
    file paths. Never hangs: the wrapper kills the child at `timeout_s`."""
    out, err = scratch / f"{tag}.out", scratch / f"{tag}.err"
    wrapper = [sys.executable, "-c", WRAPPER, str(timeout_s), str(limit_bytes), str(out), str(err)]
    try:
        done = subprocess.run(
            [*wrapper, *command],
            capture_output=True,
            text=True,
            timeout=timeout_s + 120,
            check=False,
        )
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, json.JSONDecodeError, IndexError) as exc:
        result = {"code": None, "timed_out": True, "wall_s": None, "wrapper_error": str(exc)}
    result["out"], result["err"] = out, err
    return result


def _tail(path: Path, limit: int = 20_000) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(handle.tell() - limit, 0))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def _pct(x: float | None) -> str:
    return "?" if x is None else f"{100 * x:.1f}"


def failure(run: dict[str, Any], timeout_s: float, limit_gb: float | None) -> str | None:
    """Why a child failed, in one line; None if it succeeded."""
    if run.get("wrapper_error"):
        return f"the measuring wrapper failed: {run['wrapper_error']}"
    if run["timed_out"]:
        return f"timed out (stopped at {timeout_s:.0f} s)"
    if run["code"] == 0:
        return None
    err = _tail(run["err"])
    marked = [line for line in err.splitlines() if line.startswith("HTA-FAILED: ")]
    if marked:
        text = marked[-1].removeprefix("HTA-FAILED: ")
        if limit_gb and "out of memory" in text:
            text += f" at the {limit_gb:g} GB address-space limit"
        return text
    if run["code"] < 0:
        name = signal.Signals(-run["code"]).name
        hint = " (out of memory?)" if run["code"] in (-signal.SIGKILL, -signal.SIGABRT) else ""
        return f"killed by {name}{hint}"
    lines = [line for line in err.splitlines() if line.strip()]
    return f"exit {run['code']}: {lines[-1][:160] if lines else 'no message'}"


def gpuwhy_result(run: dict[str, Any]) -> str:
    """One line from gpuwhy's JSON report: steps, GPU busy, HTA-style breakdown, findings."""
    try:
        report = json.loads(Path(run["out"]).read_text())
        rank = report["trace"]["ranks"][0]
        temporal = rank.get("temporal") or {}
        codes = ", ".join(f["code"] for f in report.get("findings", [])) or "none"
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        return f"report unreadable ({exc})"
    return (
        f"{rank['steps']} steps, GPU busy {_pct(rank.get('gpu_busy'))} %; temporal idle/compute/"
        f"non-compute {_pct(temporal.get('idle'))}/{_pct(temporal.get('compute'))}/"
        f"{_pct(temporal.get('non_compute'))} %; findings: {codes}"
    )


def hta_result(run: dict[str, Any]) -> str:
    """One line from HTA's temporal breakdown, and the time of its two stages."""
    try:
        data = json.loads(Path(run["out"]).read_text().strip().splitlines()[-1])
        row = data["rows"][0]
    except (OSError, ValueError, KeyError, IndexError) as exc:
        return f"output unreadable ({exc})"
    return (
        f"temporal idle/compute/non-compute {row['idle_time_pctg']:.1f}/"
        f"{row['compute_time_pctg']:.1f}/{row['non_compute_time_pctg']:.1f} % "
        f"(load {data['load_s']:.1f} s, breakdown {data['breakdown_s']:.1f} s)"
    )


def measure(
    tool: str, trace: Path, scratch: Path, tag: str, args: argparse.Namespace
) -> dict[str, Any]:
    """Run one tool on one trace; the row's fields."""
    if tool == "gpuwhy":
        command = [sys.executable, "-m", "gpuwhy", "report", str(trace), "--json"]
        run = run_child(command, scratch, tag, args.gpuwhy_timeout)
        why = failure(run, args.gpuwhy_timeout, None)
        result = why or gpuwhy_result(run)
    else:
        folder = trace.parent  # the trace alone in its directory: HTA reads directories
        command = [args.hta_python, "-c", HTA_CHILD, str(folder)]
        limit = int(args.hta_memory_gb * 1e9)
        run = run_child(command, scratch, tag, args.hta_timeout, limit)
        why = failure(run, args.hta_timeout, args.hta_memory_gb)
        result = why or hta_result(run)
    size = trace.stat().st_size
    wall = run.get("wall_s")
    peak = run.get("peak_kib")
    return {
        "tool": tool,
        "ok": why is None,
        "wall_s": wall,
        "cpu_s": run.get("cpu_s"),
        "peak_mib": peak / 1024 if peak is not None else None,
        "mb_s": size / 1e6 / wall if why is None and wall else None,
        "result": result,
    }


# --- the report --------------------------------------------------------------------------------


def _nproc() -> str:
    try:
        return subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return str(len(os.sched_getaffinity(0)))


def _checkout() -> str:
    """The commit gpuwhy ran from, and whether the working tree differed from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "src"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "gpuwhy from source"
    return f"gpuwhy at {head}" + (" with uncommitted changes under src/" if dirty else "")


def _hta_versions(python: str) -> str:
    code = (
        "import importlib.metadata as m, platform; print(m.version('HolisticTraceAnalysis'), "
        "m.version('pandas'), platform.python_version())"
    )
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
        hta, pandas, py = done.stdout.split()
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return "HTA (version unknown)"
    return f"HTA {hta} (pandas {pandas}, Python {py})"


def _cell(value: float | None, fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| trace | size | tool | wall s | CPU s | peak RSS MiB | MB/s | result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['trace']} | {row['size'] / 1e6:,.0f} MB | {row['tool']} | "
            f"{_cell(row['wall_s'], '.1f')} | {_cell(row['cpu_s'], '.1f')} | "
            f"{_cell(row['peak_mib'], ',.0f')} | {_cell(row['mb_s'], '.0f')} | {row['result']} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=1024, help="big trace size, MiB")
    parser.add_argument("--gap-us", type=int, default=1000, help="idle time between copies")
    parser.add_argument("--hta-python", help="a Python with HolisticTraceAnalysis==0.5.0")
    parser.add_argument("--hta-timeout", type=float, default=600.0, help="seconds, per run")
    parser.add_argument("--hta-memory-gb", type=float, default=12.0, help="RLIMIT_AS, GB")
    parser.add_argument("--gpuwhy-timeout", type=float, default=600.0, help="seconds, per run")
    parser.add_argument("--scratch", type=Path, help="where the traces go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument(
        "--trace",
        type=Path,
        help="measure this big trace (made by an earlier run with --keep) instead of building one",
    )
    parser.add_argument("--out", type=Path, default=HERE / "results" / "big_trace.md")
    args = parser.parse_args(argv)

    try:
        import gpuwhy  # noqa: F401
    except ImportError:
        sys.exit("error: gpuwhy is not importable; run with .venv/bin/python or PYTHONPATH=src")
    if not SOURCE.exists():
        sys.exit(f"error: the source trace is missing: {SOURCE}")
    if args.hta_python and not Path(args.hta_python).exists():
        sys.exit(
            f"error: no such Python: {args.hta_python} (python3 -m venv /tmp/hta-venv && "
            "/tmp/hta-venv/bin/pip install HolisticTraceAnalysis==0.5.0)"
        )
    if args.trace and not args.trace.is_file():
        sys.exit(f"error: no such trace: {args.trace}")
    if args.scratch:
        scratch = args.scratch.resolve()
        if scratch.is_relative_to(ROOT):
            sys.exit(f"error: the scratch directory must be outside the repository: {scratch}")
        scratch.mkdir(parents=True, exist_ok=True)
    else:
        scratch = Path(tempfile.mkdtemp(prefix="gpuwhy-big-trace-"))
    tools = ["gpuwhy", "HTA"] if args.hta_python else ["gpuwhy"]
    load_before = machine.load()
    checkout = _checkout()
    try:
        source_dir, big_dir = scratch / "source", scratch / "big"
        source_dir.mkdir(exist_ok=True)
        source_path = source_dir / "source.pt.trace.json"
        with gzip.open(SOURCE, "rb") as src, open(source_path, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        if args.trace:
            big_path, built = args.trace.resolve(), None
            big_dir = big_path.parent
            print(f"measuring {big_path} ({big_path.stat().st_size / 1e6:,.0f} MB)", flush=True)
        else:
            big_dir.mkdir(exist_ok=True)
            big_path = big_dir / "big.pt.trace.json"
            print(f"building a {args.size_mb:g} MiB trace in {big_dir} ...", flush=True)
            built = build(big_path, int(args.size_mb * MIB), args.gap_us)
            print(
                f"  {built['size'] / 1e6:,.0f} MB: {built['copies']} copies, "
                f"{built['events']:,} events, {built['steps']} steps, in {built['seconds']:.0f} s",
                flush=True,
            )
        others = [p for p in big_dir.iterdir() if p.name.endswith((".json", ".json.gz"))]
        if len(others) != 1:
            sys.exit(f"error: {big_dir} must hold the big trace alone (HTA reads the directory)")

        rows: list[dict[str, Any]] = []
        for label, path in (("source", source_path), ("big", big_path)):
            for tool in tools:
                print(f"{tool} on the {label} trace ...", flush=True)
                row = measure(tool, path, scratch, f"{label}-{tool}", args)
                row.update(trace=label, size=path.stat().st_size)
                rows.append(row)
                print(
                    f"  {_cell(row['wall_s'], '.1f')} s, {_cell(row['peak_mib'], ',.0f')} MiB: "
                    f"{row['result']}",
                    flush=True,
                )
    finally:
        if args.keep:
            print(f"kept {scratch}", flush=True)
        elif not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            for name in ("source", "big"):
                shutil.rmtree(scratch / name, ignore_errors=True)
    load_after = machine.load()

    big = next(r for r in rows if r["trace"] == "big" and r["tool"] == "gpuwhy")
    size = big["size"]
    met = (
        big["ok"]
        and big["wall_s"] < GOAL_S
        and big["peak_mib"] * 1024 * 1024 < GOAL_RSS_BYTES
        and size >= 1e9
    )
    if not big["ok"]:
        goal = f"**not met**: gpuwhy failed on the big trace ({big['result']})"
    elif size < 1e9:
        goal = f"not judged: the big trace is {size / 1e9:.2f} GB, under 1 GB"
    else:
        goal = (
            f"**{'met' if met else 'not met'}**: {big['wall_s']:.1f} s (goal < {GOAL_S:.0f} s), "
            f"peak RSS {big['peak_mib'] * MIB / 1e9:.2f} GB (goal < {GOAL_RSS_BYTES / 1e9:g} GB)"
        )
    command = f"python bench/big_trace.py --size-mb {args.size_mb:g}"
    if args.hta_python:
        command += (
            f" --hta-python PATH --hta-timeout {args.hta_timeout:g} "
            f"--hta-memory-gb {args.hta_memory_gb:g}"
        )
    if built:
        made = (
            f"{built['copies']} copies of the source's {built['per_copy']:,} events "
            f"({built['events']:,} in all; its {built['meta_events']} metadata events once)"
            ", ProfilerSteps "
            f"#{built['step_range'][0]}–#{built['step_range'][1]} ({built['steps']} steps), "
            f"{built['span_s']:.1f} s of profiled time; built in {built['seconds']:.0f} s"
        )
    else:
        made = f"an earlier build, {args.trace.name}"
    peers = f"; {_hta_versions(args.hta_python)}" if args.hta_python else ""
    lines = [
        "# Big traces: `gpuwhy report` on a 1 GB Kineto trace, beside HTA",
        "",
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC} with "
        f"`{command}` on {machine.cpu()}, {_nproc()} cores (nproc), {machine.ram()}, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}; "
        f"{checkout}{peers}. "
        f"Load average (1/5/15 min) {load_before} before, {load_after} after.",
        "",
        f"Source: `{SOURCE.relative_to(ROOT)}` (ResNet-50 on a V100, 6 ProfilerSteps), "
        f"decompressed: {rows[0]['size'] / 1e6:.1f} MB. Big: {size / 1e6:,.0f} MB "
        f"({size / 2**30:.2f} GiB) of plain JSON — {made}. Each copy is shifted by the source's "
        f"span plus {args.gap_us} µs, with its correlation, flow, external and sequence ids and "
        "its step numbers offset; `distributedInfo` rank 0 of 1.",
        "",
        *table(rows),
        "",
        f"Goal (issue: a 1 GB trace in under 60 s, peak memory under 1.5 GB): {goal}.",
        "",
        "Each tool runs once per trace, in a child process of its own; wall time from its start "
        "to its exit; CPU time user + system; peak RSS the child's `ru_maxrss` "
        "(`getrusage(RUSAGE_CHILDREN)` in a wrapper process that runs only it; with processes "
        "it spawns, the largest one). MB/s: the file's size over the wall time. gpuwhy: "
        "`python -m gpuwhy report TRACE --json`, the result read from its JSON (the rank's "
        "`temporal` is HTA's breakdown as gpuwhy computes it). HTA: "
        "`TraceAnalysis(trace_dir=DIR)` then `get_temporal_breakdown(visualize=False)`, its "
        f"defaults (it drops the last ProfilerStep), limited to {args.hta_memory_gb:g} GB of "
        f"address space (RLIMIT_AS) and {args.hta_timeout:.0f} s.",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
