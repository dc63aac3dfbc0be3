"""HTA side by side: Holistic Trace Analysis's own numbers for the committed profiler traces.

Runs the real HTA (PyPI `HolisticTraceAnalysis`, made for 0.5.0) with its defaults on every
`*.json.gz` under tests/data/traces/ and writes what it says to
tests/data/traces/hta_expected.json, the peer numbers the trace reader's GPU busy/idle figures are
checked against. A directory listed in MULTI_RANK_DIRS is one job with one file per rank; every
other file is a single-rank job, linked alone into a temporary directory (HTA reads directories).

Per job and rank it records:
- `get_temporal_breakdown`: idle, compute, non-compute and kernel time (µs) and HTA's percentages;
- `get_idle_time_breakdown` (default consecutive_kernel_delay): per stream, idle time that HTA
  calls host_wait / kernel_wait / other (µs), and the totals over streams;
- the window HTA analysed: the ProfilerStep numbers in the file and those it kept (it drops the
  last step unless include_last_profiler_step=True), the first start and last end of the GPU
  events it kept, in the file's own `ts` unit (µs), and how many GPU events it kept, by category;
- `get_gpu_kernel_breakdown`: time per kernel type (COMPUTATION / COMMUNICATION / MEMORY), for the
  job as HTA sums it and per rank (plain sums of kernel durations).
A job or an analysis HTA cannot do is recorded as the error HTA raised (type, first line).

Times inside HTA are the file's microseconds, shifted so the job's earliest event is 0 and, for
files with fractional timestamps, rounded to whole µs (start up, end down); the times written here
add that shift back, so they read as the file's `ts`.

Needs HTA and pandas (a throw-away venv: `pip install HolisticTraceAnalysis==0.5.0`):

    python bench/hta_side_by_side.py [--out PATH] [TRACE ...]

TRACE: paths relative to tests/data/traces (default: all of them).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import logging
import math
import os
import platform
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRACES = ROOT / "tests" / "data" / "traces"
DEFAULT_OUT = TRACES / "hta_expected.json"
PIP = "pip install HolisticTraceAnalysis==0.5.0"
COMMAND = "python bench/hta_side_by_side.py"

# Directories (relative to TRACES) that hold one job, one trace file per rank.
MULTI_RANK_DIRS = {"hta/two_ranks"}

# HTA log lines that only report timing (they differ on every run).
_NOISE = re.compile(r"^(leaving |Overall parsing |Parsed .* (time = |in )[0-9.]+ seconds)")


def _require_hta() -> None:
    try:
        import hta.trace_analysis  # noqa: F401
        import pandas  # noqa: F401
    except ImportError as exc:
        sys.exit(f"error: HTA is not importable here ({exc}); in a throw-away venv: {PIP}")


class _Collect(logging.Handler):
    """Keeps HTA's warnings and errors (minus timing chatter) for the entry they belong to."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage().strip()
        if not _NOISE.match(msg):
            first = msg.splitlines()[0] if msg else msg
            if first not in self.messages:
                self.messages.append(first)


def _quiet_hta(verbose: bool) -> _Collect:
    from hta.configs.config import logger  # the "hta" logger HTA writes to

    logger.handlers.clear()
    logger.propagate = False
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    collect = _Collect()
    logger.addHandler(collect)
    if verbose:
        logger.addHandler(logging.StreamHandler(sys.stderr))
    return collect


def _num(x: Any) -> int | float | None:
    """A plain int (when integral) or float from any numpy/pandas scalar; None for NaN."""
    if x is None:
        return None
    f = float(x)
    if math.isnan(f):
        return None
    if f.is_integer() and abs(f) < 2**53:
        return int(f)
    return f


def _error(exc: BaseException) -> dict[str, str]:
    text = str(exc).strip()
    return {"type": type(exc).__name__, "message": text.splitlines()[0] if text else ""}


def _jobs(selected: list[str]) -> list[tuple[str, list[Path]]]:
    """(name relative to TRACES, trace files) for every job: a multi-rank dir or one file."""
    jobs: dict[str, list[Path]] = {}
    for path in sorted(TRACES.rglob("*.json.gz")):
        rel_dir = path.parent.relative_to(TRACES).as_posix()
        if rel_dir in MULTI_RANK_DIRS:
            jobs.setdefault(rel_dir, []).append(path)
        else:
            jobs[path.relative_to(TRACES).as_posix()] = [path]
    if selected:
        wanted = {s.rstrip("/") for s in selected}
        unknown = wanted - set(jobs)
        if unknown:
            sys.exit(f"error: no such trace job under {TRACES}: {sorted(unknown)}")
        jobs = {k: v for k, v in jobs.items() if k in wanted}
    return sorted(jobs.items())


@contextlib.contextmanager
def _job_dir(files: list[Path]) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="hta-job-") as tmp:
        for f in files:
            os.symlink(f, os.path.join(tmp, f.name))
        yield tmp


def _step_no(name: str) -> int | None:
    m = re.match(r"ProfilerStep\s*#\s*(\d+)", name)
    return int(m.group(1)) if m else None


def _raw_facts(raw: dict[str, Any]) -> dict[str, Any]:
    """ProfilerStep numbers and GPU events (args.stream other than -1) in the file itself."""
    events = raw.get("traceEvents", []) if isinstance(raw, dict) else raw
    steps: set[int] = set()
    gpu_by_cat: dict[str, int] = {}
    for e in events:
        if not isinstance(e, dict) or "dur" not in e:
            continue
        name = str(e.get("name", ""))
        if name.startswith("ProfilerStep"):
            n = _step_no(name)
            if n is not None:
                steps.add(n)
        args = e.get("args")
        if isinstance(args, dict) and args.get("stream", -1) not in (-1, "-1", None):
            cat = str(e.get("cat"))
            gpu_by_cat[cat] = gpu_by_cat.get(cat, 0) + 1
    return {"steps": sorted(steps), "gpu_events_by_cat": dict(sorted(gpu_by_cat.items()))}


def _window(ta: Any, rank: int) -> dict[str, Any]:
    """What HTA kept for a rank: steps, GPU events, their span (file µs)."""
    t = ta.t
    df = t.get_trace(rank)
    sym = t.symbol_table.get_sym_table()
    shift = t.min_ts  # HTA subtracted this from every ts (earliest event of the job -> 0)

    names = df["name"].map(lambda i: sym[i])
    cats = df["cat"].map(lambda i: sym[i])
    is_step = names.str.startswith("ProfilerStep") & df["stream"].eq(-1)
    steps = df[is_step]
    kept_steps = sorted({n for n in names[is_step].map(_step_no) if n is not None})

    gpu = df[df["stream"].ne(-1)]  # what get_temporal_breakdown takes as GPU kernels
    out: dict[str, Any] = {
        "steps_kept": kept_steps,
        "iterations_with_events": [int(i) for i in t.get_iterations(rank)],
        "gpu_events_kept": len(gpu),
        "gpu_events_kept_by_cat": {
            str(k): int(v) for k, v in sorted(cats[gpu.index].value_counts().items())
        },
        "gpu_events_zero_dur": int((gpu["dur"] == 0).sum()),
        "gpu_events_negative_dur_after_rounding": int((gpu["dur"] < 0).sum()),
    }
    if len(gpu):
        out["first_gpu_start_us"] = _num(gpu["ts"].min() + shift)
        out["last_gpu_end_us"] = _num((gpu["ts"] + gpu["dur"]).max() + shift)
    if len(steps):
        out["first_kept_step_start_us"] = _num(steps["ts"].min() + shift)
        out["last_kept_step_end_us"] = _num((steps["ts"] + steps["dur"]).max() + shift)
        # Kernels whose launching runtime call (matched by correlation id) began before the
        # first kept ProfilerStep: HTA keeps them (its filter has no lower bound).
        if len(gpu) and "index_correlation" in gpu.columns:
            launch_idx = gpu["index_correlation"]
            launch_idx = launch_idx[launch_idx > 0]
            launch_ts = df.loc[df.index.intersection(launch_idx), "ts"]
            out["gpu_events_launched_before_first_kept_step"] = int(
                (launch_ts < steps["ts"].min()).sum()
            )
            out["gpu_events_without_matched_launch"] = int((gpu["index_correlation"] <= 0).sum())
    return out


def _temporal(ta: Any) -> dict[int, dict[str, Any]]:
    df = ta.get_temporal_breakdown(visualize=False)
    out: dict[int, dict[str, Any]] = {}
    for row in df.to_dict("records"):
        out[int(row["rank"])] = {k: _num(v) for k, v in row.items() if k != "rank"}
    return out


def _idle(ta: Any, rank: int) -> dict[str, Any]:
    df, _ = ta.get_idle_time_breakdown(ranks=[rank], visualize=False)
    cats = ("host_wait", "kernel_wait", "other")
    streams: dict[str, dict[str, Any]] = {}
    for row in df.to_dict("records"):
        s = streams.setdefault(str(int(row["stream"])), dict.fromkeys(cats, 0))
        s[str(row["idle_category"])] = _num(row["idle_time"])
    totals: dict[str, Any] = {c: _num(sum(s[c] or 0 for s in streams.values())) for c in cats}
    totals["all"] = _num(sum(totals[c] for c in cats))
    return {"streams": dict(sorted(streams.items(), key=lambda kv: int(kv[0]))), "total": totals}


def _kernel_types(ta: Any) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    type_df, all_df = ta.get_gpu_kernel_breakdown(visualize=False)
    job = {
        str(r["kernel_type"]): {"sum_us": _num(r["sum"]), "percentage": _num(r["percentage"])}
        for r in type_df.to_dict("records")
    }
    per_rank: dict[int, dict[str, Any]] = {}
    if len(all_df):
        grouped = all_df.groupby(["rank", "kernel_type"])["sum (us)"].sum()
        for (rank, ktype), total in grouped.items():
            per_rank.setdefault(int(rank), {})[str(ktype)] = _num(total)
    return job, per_rank


def analyse(files: list[Path], collect: _Collect) -> dict[str, Any]:
    from hta.trace_analysis import TraceAnalysis

    collect.messages.clear()
    entry: dict[str, Any] = {"files": [f.relative_to(TRACES).as_posix() for f in files]}
    with _job_dir(files) as tmp:
        try:
            ta = TraceAnalysis(trace_dir=tmp)  # HTA's defaults: last ProfilerStep dropped
        except Exception as exc:  # what HTA says is the result here
            entry["error"] = {"stage": "TraceAnalysis", **_error(exc)}
            entry["hta_warnings"] = list(collect.messages)
            return entry

        ranks = ta.t.get_ranks()
        rank_file = {r: Path(p).name for r, p in ta.t.trace_files.items()}
        per_rank: dict[int, dict[str, Any]] = {
            r: {"file": rank_file.get(r), "rank": r} for r in ranks
        }
        for r in ranks:
            try:
                raw = ta.t.get_raw_trace_for_one_rank(r)
                per_rank[r]["in_file"] = _raw_facts(raw)
            except Exception as exc:
                per_rank[r]["in_file"] = {"error": _error(exc)}
            try:
                per_rank[r]["window"] = _window(ta, r)
            except Exception as exc:
                per_rank[r]["window"] = {"error": _error(exc)}

        try:
            for r, v in _temporal(ta).items():
                per_rank[r]["temporal_breakdown"] = v
        except Exception as exc:
            for r in ranks:
                per_rank[r]["temporal_breakdown"] = {"error": _error(exc)}

        for r in ranks:
            try:
                per_rank[r]["idle_time_breakdown"] = _idle(ta, r)
            except Exception as exc:
                per_rank[r]["idle_time_breakdown"] = {"error": _error(exc)}

        try:
            job_types, rank_types = _kernel_types(ta)
            entry["kernel_type_breakdown_job"] = job_types
            for r in ranks:
                per_rank[r]["kernel_type_sum_us"] = rank_types.get(r, {})
        except Exception as exc:
            entry["kernel_type_breakdown_job"] = {"error": _error(exc)}

    entry["ranks"] = {str(r): per_rank[r] for r in ranks}
    entry["hta_warnings"] = list(collect.messages)
    return entry


def _summary_line(name: str, entry: dict[str, Any]) -> str:
    if "error" in entry:
        e = entry["error"]
        return f"{name}: HTA error {e['type']}: {e['message']}"
    parts = []
    for r, d in entry["ranks"].items():
        tb = d.get("temporal_breakdown", {})
        idle = d.get("idle_time_breakdown", {})
        if "error" in tb:
            parts.append(f"rank {r}: temporal {tb['error']['type']}")
            continue
        tot = idle.get("total", {})
        parts.append(
            f"rank {r}: idle {tb['idle_time_pctg']}% compute {tb['compute_time_pctg']}% "
            f"non-compute {tb['non_compute_time_pctg']}% of {tb['kernel_time(us)']} us; "
            f"host/kernel/other wait {tot.get('host_wait')}/{tot.get('kernel_wait')}/"
            f"{tot.get('other')} us"
        )
    return f"{name}: " + " | ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", help="jobs relative to tests/data/traces (default all)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON to write")
    ap.add_argument("--verbose", action="store_true", help="show HTA's own log on stderr")
    args = ap.parse_args()

    _require_hta()
    from importlib.metadata import version

    collect = _quiet_hta(args.verbose)
    result: dict[str, Any] = {
        "hta_version": version("HolisticTraceAnalysis"),
        "generated": datetime.date.today().isoformat(),
        "command": COMMAND,
        "environment": {
            "python": platform.python_version(),
            "pandas": version("pandas"),
            "numpy": version("numpy"),
        },
        "conventions": {
            "time_unit": "us, as the trace's `ts`/`dur` (HTA does not convert to ns; fractional "
            "ts are rounded: start up, end down, to whole us)",
            "step_window": "HTA defaults (include_last_profiler_step=False): GPU events kept "
            "only if their correlated launch (CPU event with the same correlation id) began "
            "before the last ProfilerStep's start; no lower bound; no filtering at all when the "
            "job has fewer than two distinct ProfilerStep names",
            "window": "first_gpu_start_us/last_gpu_end_us span every kept event with a stream "
            "(kernels, memcpy, memset, and cuda_sync where present): the set "
            "get_temporal_breakdown uses; kernel_time(us) = last_gpu_end_us - first_gpu_start_us",
            "idle_time_breakdown": "get_idle_time_breakdown(ranks=[rank], visualize=False), "
            "default consecutive_kernel_delay=30 (compared with us gaps)",
            "kernel_type_breakdown_job": "get_gpu_kernel_breakdown(visualize=False) kernel-type "
            "table (merged intervals per type, overlaps split out, summed over ranks)",
            "kernel_type_sum_us": "per rank, plain sum of kernel durations per type from "
            "get_gpu_kernel_breakdown's per-kernel table",
        },
        "traces": {},
    }
    for name, files in _jobs(args.traces):
        print(f"... {name}", file=sys.stderr, flush=True)
        entry = analyse(files, collect)
        result["traces"][name] = entry
        print(_summary_line(name, entry), flush=True)

    args.out.write_text(json.dumps(result, indent=1, sort_keys=False) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
