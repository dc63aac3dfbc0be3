"""The kernel-level part of a page, per rank: the figures, the busy chart, HTA's idle split per
stream and the place the kernel timeline is drawn (assets/kernels.js, from kernel_lanes.py).

A trace's page (trace_page.py) is made of it; a run's page (page.py) shows it for the run's
profiler window (`gpuwhy run --profile`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuwhy.analysis.kernels.diagnosis import KernelReport
from gpuwhy.durations import seconds
from gpuwhy.report.html.format import esc, percent

KERNELS_ELEMENT_ID = "gpuwhy-kernels"
CHART_W, CHART_H = 900, 90
BUSY_COLOR = "#2f7ed8"


def _chart(timeline: Mapping[str, Any]) -> str:
    """The busy share per bucket as bars, the steps' starts as ticks, one SVG."""
    busy: Sequence[float] = timeline["busy"]
    width = CHART_W / max(len(busy), 1)
    bars = "".join(
        f'<rect x="{i * width:.2f}" y="{CHART_H * (1 - share):.2f}" width="{width:.2f}" '
        f'height="{CHART_H * share:.2f}"/>'
        for i, share in enumerate(busy)
        if share > 0
    )
    total_s = timeline["bucket_s"] * len(busy)
    ticks = "".join(
        f'<line x1="{CHART_W * start / total_s:.1f}" x2="{CHART_W * start / total_s:.1f}" '
        f'y1="0" y2="{CHART_H}"/><text x="{CHART_W * start / total_s + 3:.1f}" y="11">'
        f"#{esc(number)}</text>"
        for number, start in timeline["steps"]
        if total_s > 0
    )
    bucket = seconds(timeline["bucket_s"])
    label = f"GPU busy across the profiled steps, {seconds(total_s)} (each bar {bucket})"
    return (
        f'<svg class="kt" role="img" aria-label="{esc(label)}" viewBox="0 0 {CHART_W} {CHART_H}" '
        f'width="{CHART_W}" height="{CHART_H}" preserveAspectRatio="none">'
        f'<rect class="kt-bg" width="{CHART_W}" height="{CHART_H}" fill="#eef1f5"/>'
        f'<g class="kt-busy" fill="{BUSY_COLOR}">{bars}</g>'
        f'<g class="kt-steps" stroke="#555" fill="#333" font-size="10">{ticks}</g></svg>'
        f'<p class="hint">{esc(label)}; ticks mark the steps.</p>'
    )


def _lanes(index: int) -> str:
    """Where the script draws the rank's kernel timeline."""
    return (
        f'<h4>Kernel timeline</h4><div class="kl" data-index="{index}" tabindex="0" '
        'aria-label="kernel timeline of the rank"><noscript><p class="none">The kernel timeline '
        "is drawn by the page's script; the tables hold the figures.</p></noscript></div>"
    )


def _stream_idle(streams: Mapping[str, Mapping[str, float]] | None) -> str:
    """HTA's idle split per stream: which stream waited on the host, which on other work."""
    if not streams:
        return ""
    rows = "".join(
        f"<tr><td>{esc(stream)}</td><td>{esc(seconds(idle['idle_s']))}</td>"
        f"<td>{esc(percent(idle['host_wait']))}</td><td>{esc(percent(idle['kernel_wait']))}</td>"
        f"<td>{esc(percent(idle['other']))}</td></tr>"
        for stream, idle in streams.items()
    )
    return (
        '<p class="hint">Idle per stream (Holistic Trace Analysis\' split, over its window: the '
        "work launched before the last profiled step, all of it with one step): the gap before "
        "each op on the stream, by what it waited for.</p>"
        '<div class="scroll"><table class="kstreams"><thead><tr><th>stream</th><th>idle</th>'
        "<th>waiting for the host</th><th>between kernels</th><th>other</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></div>"
    )


MAX_STEP_ROWS = 200  # a page's table; the JSON report has every step


def _per_step(rows: Sequence[Mapping[str, Any]]) -> str:
    """Each step's own figures: which steps were slow, and where their time went."""
    if len(rows) < 2:
        return ""

    def ms(value: float | None) -> str:
        return "–" if value is None else f"{value:.1f} ms"

    def us(value: float | None) -> str:
        return "–" if value is None else f"{value:.1f} µs"

    body = "".join(
        f"<tr><td>{esc(row['number'])}</td><td>{esc(seconds(row['time_s']))}</td>"
        f"<td>{esc(percent(row['gpu_busy']))}</td>"
        f"<td>{esc(percent(row['idle_split']['host_wait']))}</td>"
        f"<td>{esc(percent(row['idle_split']['kernel_wait']))}</td>"
        f"<td>{esc(percent(row['idle_split']['other']))}</td><td>{row['kernels']}</td>"
        f"<td>{esc(us(row['kernel_median_us']))}</td><td>{esc(ms(row['loader_ms']))}</td><td>{esc(ms(row['sync_ms']))}</td>"
        f"<td>{esc(ms(row['optimizer_ms']))}</td></tr>"
        for row in rows[:MAX_STEP_ROWS]
    )
    more = (
        f'<p class="hint">First {MAX_STEP_ROWS} of {len(rows)} steps; the JSON report has all.</p>'
        if len(rows) > MAX_STEP_ROWS
        else ""
    )
    return (
        '<div class="scroll"><table class="ksteps"><thead><tr><th>step</th><th>time</th>'
        "<th>GPU busy</th><th>waiting for the host</th><th>between kernels</th><th>other</th>"
        "<th>kernels</th><th>median kernel</th><th>data loader</th><th>syncs</th>"
        f"<th>optimizer</th></tr></thead><tbody>{body}</tbody></table></div>{more}"
    )


def _per_device(devices: Mapping[str, Mapping[str, Any]]) -> str:
    """Each device's own busy share and idle split, where the rank drove several."""
    if len(devices) < 2:
        return ""
    body = "".join(
        f"<tr><td>{esc(device)} ({esc(row.get('name', 'GPU'))})</td>"
        f"<td>{esc(percent(row['busy']))}</td>"
        f"<td>{esc(percent(row['idle_split']['host_wait']))}</td>"
        f"<td>{esc(percent(row['idle_split']['kernel_wait']))}</td>"
        f"<td>{esc(percent(row['idle_split']['other']))}</td>"
        f"<td>{esc(percent(row['work_split']['compute']))}</td>"
        f"<td>{esc(percent(row['work_split']['communication']))}</td>"
        f"<td>{esc(percent(row['work_split']['memcpy']))}</td></tr>"
        for device, row in devices.items()
    )
    return (
        '<p class="hint">Per device (the figures above are unions over the devices), as shares '
        "of the steps' time.</p>"
        '<div class="scroll"><table class="kdevices"><thead><tr><th>device</th><th>busy</th>'
        "<th>waiting for the host</th><th>between kernels</th><th>other</th><th>compute</th>"
        f"<th>communication</th><th>copies</th></tr></thead><tbody>{body}</tbody></table></div>"
    )


def _steps_note(rank: Any) -> str:
    if not rank.step_markers:
        return " (no step markers)"
    return " (timed on the device: the host ran ahead)" if rank.steps_on_device else ""


def _rank(rank: Any, lanes: str) -> str:
    name = "the trace" if rank.rank is None else f"rank {rank.rank}"
    if rank.gpu_busy is None:
        return (
            f'<section class="rank"><h3>{esc(name)}</h3><p>No GPU work in the trace.</p></section>'
        )
    rows = [
        ("steps", f"{rank.steps}" + _steps_note(rank)),
        ("step time (median)", seconds(rank.step_time_p50_s)),
        ("GPU busy", percent(rank.gpu_busy)),
        ("idle: waiting for the host", percent(rank.idle_split["host_wait"])),
        ("idle: between kernels", percent(rank.idle_split["kernel_wait"])),
        ("idle: other", percent(rank.idle_split["other"])),
        ("compute", percent(rank.work_split["compute"])),
        ("communication", percent(rank.work_split["communication"])),
        ("copies", percent(rank.work_split["memcpy"])),
        (
            "kernels a step",
            "–" if rank.kernels_per_step is None else f"{rank.kernels_per_step:.0f}",
        ),
        ("data loader a step", "–" if rank.loader_ms is None else f"{rank.loader_ms:.1f} ms"),
        (
            "of it with the GPU idle",
            "–" if rank.loader_exposed_ms is None else f"{rank.loader_exposed_ms:.1f} ms",
        ),
    ]
    table = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    top = "".join(
        f'<tr><td class="phase-name">{esc(k.name)}</td><td>{esc(k.kind)}</td>'
        f"<td>{k.count}</td><td>{esc(seconds(k.time_s))}</td><td>{esc(percent(k.share))}</td></tr>"
        for k in rank.top_kernels
    )
    chart = _chart(rank.busy_timeline) if rank.busy_timeline else ""
    return (
        f'<section class="rank" data-rank="{esc(rank.rank)}"><h3>{esc(name)}</h3>{chart}{lanes}'
        f'<div class="scroll"><table class="kfacts">{table}</table></div>'
        f"{_per_device(rank.per_device)}{_stream_idle(rank.stream_idle)}{_per_step(rank.per_step)}"
        '<div class="scroll"><table class="ktop"><thead><tr><th>top kernels</th><th>kind</th>'
        f"<th>count</th><th>time</th><th>share</th></tr></thead><tbody>{top}</tbody></table>"
        "</div></section>"
    )


def rank_sections(kernels: KernelReport, lanes: Sequence[Mapping[str, Any] | None]) -> str:
    """Every rank's section; ``lanes``: kernel_lanes' data in the ranks' order (may be empty)."""
    return "".join(
        _rank(rank, _lanes(i) if i < len(lanes) and lanes[i] else "")
        for i, rank in enumerate(kernels.ranks)
    )
