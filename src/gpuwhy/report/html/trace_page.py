"""The HTML report of a profiler trace (`gpuwhy report TRACE --html FILE`): one page.

The same sections as a run's page (verdict, phases, findings) and, per rank, the kernel-level
figures, the device's busy share across the profiled steps as inline SVG (read without any
script), and the zoomable kernel timeline: every op on its stream's row, drawn by one inline
script (assets/kernels.js) from a JSON block (kernel_lanes.py). As on a run's page, the
Content-Security-Policy allows that one script by its hash and no request, so the page opens
offline and markup that slipped past escaping could not run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from gpuwhy.analysis import Diagnosis
from gpuwhy.durations import seconds
from gpuwhy.report.html.format import esc
from gpuwhy.report.html.kernel_lanes import kernel_lanes
from gpuwhy.report.html.kernel_section import rank_sections
from gpuwhy.report.html.page import asset, csp, kernels_block, script_json, write_page_text
from gpuwhy.report.html.sections import findings, phases
from gpuwhy.report.verdict import verdict
from gpuwhy.traces import RankTrace


def _header(diagnosis: Diagnosis) -> str:
    kernels = diagnosis.kernels
    paths = ", ".join(kernels.paths[:3]) + (" …" if len(kernels.paths) > 3 else "")
    facts = [
        f"{seconds(diagnosis.duration_s)} profiled",
        f"{len(kernels.ranks)} trace{'s' if len(kernels.ranks) != 1 else ''} ({kernels.source})",
    ]
    return (
        '<header class="top"><h1>gpuwhy report · profiler trace</h1>'
        f'<p class="verdict" id="verdict">{esc(verdict(diagnosis))}</p>'
        f'<p class="command"><code id="command">{esc(paths)}</code></p>'
        f'<p class="facts">{esc(" · ".join(facts))}</p>'
        '<nav><a href="#kernels">Kernels</a><a href="#phases">Phases</a>'
        '<a href="#findings">Findings</a></nav></header>'
    )


def render_trace_html(diagnosis: Diagnosis, traces: Sequence[RankTrace] = ()) -> str:
    """The whole page as text (deterministic for a given trace). ``traces``: the ranks' traces
    the diagnosis was made from, in its order, for the kernel timeline (none: no timeline)."""
    kernels = diagnosis.kernels
    lanes = kernel_lanes(traces) if traces else []
    body = (
        _header(diagnosis)
        + '<section id="kernels"><h2>Kernels</h2>'
        + rank_sections(kernels, lanes)
        + "</section>"
        + phases(diagnosis)
        + findings(diagnosis)
    )
    script = asset("kernels.js")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp(script))}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{esc(('gpuwhy · ' + kernels.paths[0])[:200])}</title>"
        f"<style>{asset('report.css')}</style></head>"
        f"<body><main>{body}<footer>Made by gpuwhy from the profiler trace; this file needs no "
        "network and no other file.</footer></main>"
        f"{kernels_block(script_json(lanes), script)}</body></html>\n"
    )


def write_trace_html(
    diagnosis: Diagnosis, path: str | os.PathLike[str], traces: Sequence[RankTrace] = ()
) -> None:
    """Write the trace's HTML report to ``path`` (replaced whole; UsageError if it cannot be)."""
    write_page_text(render_trace_html(diagnosis, traces), path)
