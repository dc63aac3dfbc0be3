"""A run's profiler window (`gpuwhy run --profile`) folded into the run's report.

The run's own analysis covers the whole job; the window's trace adds what only kernels show: the
kernel-level section, and the kernel-aware findings the run did not already make (a code the run
found stands as the run found it: it covers every step, the window a few). The window's cost is
measured, not assumed: the median step inside the window over the median step outside it, from
the run's own step spans.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuwhy.analysis.diagnose import Diagnosis
from gpuwhy.analysis.kernels.diagnosis import diagnose_traces
from gpuwhy.model import Event, Span, sort_findings
from gpuwhy.traces import RankTrace
from gpuwhy.wire import PROFILE_EVENT


def window_cost(events: Iterable[Event], steps: Iterable[Span]) -> dict[str, Any] | None:
    """The window's bounds and what it cost the steps inside it; None when no window closed."""
    window = next((e.data for e in events if e.kind == PROFILE_EVENT), None)
    if not window or window.get("start_ns") is None:
        return None
    start, end = int(window["start_ns"]), int(window["end_ns"])
    inside: list[float] = []
    outside: list[float] = []
    for span in steps:
        per_step = (span.end_ns - span.start_ns) / max(span.steps, 1) / 1e9
        (inside if start <= span.start_ns < end else outside).append(per_step)
    cost: dict[str, Any] = {
        "steps": window.get("steps"),
        "steps_asked": window.get("steps_asked"),
        "skipped_steps": window.get("skip"),
        "path": window.get("path"),
        "export_s": window.get("export_s"),
        "step_inside_p50_s": _median(inside),
        "step_outside_p50_s": _median(outside),
    }
    if cost["step_inside_p50_s"] and cost["step_outside_p50_s"]:
        cost["inside_over_outside"] = round(
            cost["step_inside_p50_s"] / cost["step_outside_p50_s"], 3
        )
    return cost


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 6) if values else None


def with_profile(
    diagnosis: Diagnosis, traces: Sequence[RankTrace], cost: Mapping[str, Any] | None
) -> Diagnosis:
    """The run's diagnosis with the window's kernel section and its new findings."""
    profiled = diagnose_traces(traces)
    found = {finding.code for finding in diagnosis.findings}
    added = [finding for finding in profiled.findings if finding.code not in found]
    kernels = dataclasses.replace(profiled.kernels, window=dict(cost) if cost else None)
    return dataclasses.replace(
        diagnosis, kernels=kernels, findings=sort_findings([*diagnosis.findings, *added])
    )
