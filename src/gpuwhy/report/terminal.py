"""The terminal summary printed when `gpuwhy run` ends (and by `gpuwhy report`).

One screen: the verdict, a phase table, then the findings most valuable first with their evidence
and fix, then the environment's problems. Width comes from the console (`make_console`: the
terminal's, else $COLUMNS, else 80); escape codes only on a terminal and never with NO_COLOR, so
a log file gets plain text. Lines carry no trailing blanks, so the text diffs and pastes cleanly.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from rich import box
from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

from gpuwhy.analysis import Diagnosis, PhaseStats
from gpuwhy.analysis.ranks import RankPhase
from gpuwhy.analysis.rules.input_bound import held_back_as_stall, others_wait_fraction
from gpuwhy.durations import seconds
from gpuwhy.model import Finding, Severity
from gpuwhy.report import one_time
from gpuwhy.report.verdict import environment_problems, verdict

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_MAX_EVIDENCE = 6  # items shown per finding; the JSON report has them all
_INDENT = 3


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _util(values: Mapping[int, float] | None) -> str:
    if not values:
        return "–"
    return " ".join(f"{d}:{v:.0f}%" for d, v in sorted(values.items()))


def make_console(
    stream: TextIO, *, environ: Mapping[str, str] = os.environ, width: int | None = None
) -> Console:
    """The console the report is printed on: styled on a terminal, plain text elsewhere.

    NO_COLOR (no-color.org) set to anything but "" turns every escape code off, bold and dim
    included, not only the colours: whoever sets it gets text a screen reader or a log can take.
    ``width`` fixes the width (tests); by default the terminal's, else $COLUMNS, else 80.
    """
    plain = environ.get("NO_COLOR", "") != ""
    return Console(
        file=stream,
        width=width,
        color_system=None if plain else "auto",
        no_color=plain or None,
        legacy_windows=False,
        _environ=dict(environ),
    )


def _phase_table(phases: Mapping[str, PhaseStats]) -> Table:
    # Two blanks between columns (collapsed padding) keep all eight within 80 columns; the last
    # column is right-aligned so no row ends in blanks.
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    for name, justify in (
        ("phase", "left"),
        ("time", "right"),
        ("share", "right"),
        ("steps", "right"),
        ("step p50", "right"),
        ("step p95", "right"),
        ("data wait", "right"),
        ("GPU util", "right"),
    ):
        # Phase names stay whole; on a narrow terminal the numbers wrap ("40.0 / ms"), never
        # truncated to an ellipsis.
        table.add_column(
            name,
            justify=justify,  # type: ignore[arg-type]
            no_wrap=name == "phase",
            overflow="fold",
        )
    for phase in phases.values():
        table.add_row(
            Text(phase.name),  # a Text: a phase named "[x]" is not read as markup
            seconds(phase.time_s),
            _pct(phase.share),
            str(phase.steps) if phase.steps else "",
            seconds(phase.step_time_p50_s) if phase.steps else "",
            seconds(phase.step_time_p95_s) if phase.steps else "",
            _pct(phase.data_wait_fraction),
            _util(phase.gpu_util_pct),
            style="dim" if phase.is_pseudo else None,
        )
    return table


RANK_ROWS_SHOWN = 16
"""A larger job's table keeps the ranks that wait most for input (the likely stragglers) and
the first ranks; the JSON report has them all."""


def _rank_rows(rows: Sequence[RankPhase]) -> tuple[list[RankPhase], int]:
    if len(rows) <= RANK_ROWS_SHOWN:
        return list(rows), 0
    half = RANK_ROWS_SHOWN // 2
    waiting = sorted(rows, key=lambda row: -(row.wait_per_step_s or 0.0))[:half]
    first = [row for row in rows if row not in waiting][:half]
    shown = set(map(id, waiting + first))
    return [row for row in rows if id(row) in shown], len(rows) - len(shown)


def _rank_table(rows: Sequence[RankPhase]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    for name in ("rank", "host", "steps", "step p50", "step p95", "wait/step", "wait", "GPU"):
        table.add_column(
            name,
            justify="left" if name in ("rank", "host") else "right",
            no_wrap=name == "rank",
            overflow="fold",
        )
    shown, _ = _rank_rows(rows)
    for row in shown:
        gpu = ""
        if row.device is not None:
            gpu = f"{row.device}" + (
                f" {row.gpu_util_pct:.0f}%" if row.gpu_util_pct is not None else ""
            )
        table.add_row(
            Text(row.label),
            Text(row.host or ""),
            str(row.steps),
            seconds(row.step_time_p50_s),
            seconds(row.step_time_p95_s),
            seconds(row.wait_per_step_s),
            _pct(row.wait_fraction),
            gpu,
        )
    return table


def _nodes_line(nodes: Sequence[Mapping[str, Any]]) -> str:
    """How a job's node recordings were put on one clock (recording/merged.py)."""
    parts = []
    for number, node in enumerate(nodes):
        host = node.get("host") or f"node {number}"
        if number == 0:
            parts.append(f"{host}: the reference clock")
            continue
        steps, residual = node.get("common_steps") or 0, node.get("residual_s")
        if not steps or residual is None:
            parts.append(f"{host}: by wall clock only (no common training steps)")
            continue
        parts.append(
            f"{host}: by wall clock, corrected {node['correction_s'] * 1000:+.1f} ms from "
            f"{steps} common steps (left over: {residual * 1000:.1f} ms p95)"
        )
    return f"{len(nodes)} node recordings, aligned — " + "; ".join(parts)


def _rank_section(diagnosis: Diagnosis, console: Console) -> None:
    """Per rank, the training phase (or the phase with the most steps) of a data-parallel job."""
    if not diagnosis.ranks:
        return
    name = (
        "train"
        if "train" in diagnosis.ranks
        else max(diagnosis.ranks, key=lambda phase: diagnosis.phases[phase].steps)
    )
    rows = diagnosis.ranks[name]
    console.print(Text(f"Per rank in '{name}' ({len(rows)} ranks)", style="bold underline"))
    _wrapped(console, _rank_table(rows))
    _, hidden = _rank_rows(rows)
    if hidden:
        _wrapped(console, Text(f"(+{hidden} more ranks: --json has every rank)", style="dim"))


def _stall_line(diagnosis: Diagnosis) -> str:
    """Phases whose steady wait is one step's stall: their data-wait share is no input too slow
    for its steps, and INPUT_BOUND was held back for that alone (rules/input_bound.py)."""
    parts = []
    phases = list(diagnosis.phases.values())
    for phase in phases:
        if not held_back_as_stall(phase, phases, diagnosis.duration_s):
            continue
        collected = (
            f" (full garbage collections held {seconds(phase.steady_wait_gc_s)} of its wait)"
            if phase.steady_wait_gc_s > 0
            else ""
        )
        parts.append(
            f"'{phase.name}' waited {seconds(phase.steady_wait_longest_s)} in one step, its "
            f"other steady steps {_pct(others_wait_fraction(phase))} of their time{collected}"
        )
    if not parts:
        return ""
    return "A stall, not a slow input (it does not recur, so no INPUT_BOUND): " + "; ".join(parts)


def _evidence(evidence: Mapping[str, Any]) -> str:
    items = [(k, v) for k, v in evidence.items() if k != "reference" and v is not None]
    shown = [f"{k}={v}" for k, v in items[:_MAX_EVIDENCE]]
    return ", ".join(shown) + (", …" if len(items) > _MAX_EVIDENCE else "")


def _finding(console: Console, number: int, finding: Finding) -> None:
    head = Text(f"{number}. ")
    head.append(f"{finding.severity.value.upper()} {finding.code}", style=_STYLE[finding.severity])
    if finding.speedup is not None:
        head.append(f"  ~{finding.speedup:.2f}x faster if fixed", style="bold")
    _wrapped(console, head)
    body = [
        Text(finding.title, style="bold"),
        Text(f"evidence: {_evidence(finding.evidence)}", style="dim"),
        Text(f"fix: {finding.fix}"),
    ]
    if finding.speedup_method:
        body.append(Text(f"estimate: {finding.speedup_method}", style="dim"))
    for text in body:
        _wrapped(console, text, _INDENT)


def _wrapped(console: Console, renderable: RenderableType, indent: int = 0) -> None:
    """``renderable`` at the console's width under an indent, each line without blanks after.

    rich pads wrapped text and table cells to their full width; the blanks are cut here.
    """
    if indent:
        renderable = Padding(renderable, (0, 0, 0, indent), expand=False)
    for line in console.render_lines(renderable, pad=False, new_lines=False):
        while line and not line[-1].control and not line[-1].text.rstrip():
            line.pop()
        if line:
            last = line[-1]
            line[-1] = Segment(last.text.rstrip(), last.style, last.control)
        line.append(Segment.line())
        console.print(Segments(line), end="", crop=False, no_wrap=True, overflow="ignore")


def _header(diagnosis: Diagnosis) -> str:
    if diagnosis.kernels is not None and diagnosis.meta.get("source"):  # a trace, not a run
        paths = diagnosis.kernels.paths
        what = paths[0] if len(paths) == 1 else f"{len(paths)} traces ({paths[0]}, …)"
        return f"gpuwhy: profiler trace {what} — {diagnosis.duration_s:.2f} s profiled"
    command = shlex.join(diagnosis.command) if diagnosis.command else "(command not recorded)"
    if diagnosis.command_raw:
        command += " (not redacted: recorded with --no-redact)"
    exit_text = "" if diagnosis.exit_code is None else f", exit code {diagnosis.exit_code}"
    return f"gpuwhy: {command} — {diagnosis.duration_s:.1f} s{exit_text}"


def _window_line(window: Mapping[str, Any]) -> str:
    steps, skipped = window.get("steps"), window.get("skipped_steps")
    text = f"profiler window: {steps} steps after the first {skipped}"
    if window.get("steps_asked") not in (None, steps):
        text += f" (of {window['steps_asked']} asked: the job ended inside the window)"
    ratio = window.get("inside_over_outside")
    if ratio:
        text += f"; steps inside took {ratio:.2f}x as long as outside (the profiler's own cost)"
    if window.get("export_s") is not None:
        text += f"; writing the trace paused the job {window['export_s']:.1f} s"
    return text + f"; trace: {window.get('path')}"


def _kernel_lines(kernels: Any) -> list[str]:
    """Per rank, what the device did in the profiled steps."""
    lines = [_window_line(kernels.window)] if kernels.window else []
    for rank in kernels.ranks:
        label = "the trace" if rank.rank is None else f"rank {rank.rank}"
        if rank.gpu_busy is None:
            lines.append(f"{label}: no GPU work in the trace ({rank.steps} steps)")
            continue
        if not rank.step_markers:
            label += (
                " (no step markers: its device work as one window; only the waits the trace"
                " times are judged)"
            )
        elif rank.steps_on_device:
            label += " (the host ran ahead of the device: its steps timed on the device)"
        idle, work = rank.idle_split, rank.work_split
        text = (
            f"{label}: GPU busy {rank.gpu_busy:.0%} of the steps; idle: waiting for the host "
            f"{idle['host_wait']:.0%}, between kernels {idle['kernel_wait']:.0%}, other "
            f"{idle['other']:.0%}; compute {work['compute']:.0%}, communication "
            f"{work['communication']:.0%}, copies {work['memcpy']:.0%}"
        )
        if rank.kernels_per_step is not None and rank.kernel_median_us is not None:
            count, median = rank.kernels_per_step, rank.kernel_median_us
            text += f"; {count:.0f} kernels a step, median {median:.1f} µs"
        if rank.loader_ms:
            text += (
                f"; data loader {rank.loader_ms:.1f} ms a step, "
                f"{rank.loader_exposed_ms or 0:.1f} ms with the GPU idle"
            )
        lines.append(text)
        if len(rank.per_device) > 1:  # the figures above are unions over the devices
            lines.append(
                "   per GPU, busy of the steps: "
                + ", ".join(f"{d} {row['busy']:.0%}" for d, row in rank.per_device.items())
            )
        if rank.top_kernels:
            top = rank.top_kernels[0]
            lines.append(f"   top kernel: {top.name[:70]} ({top.share:.0%} of device time)")
    return lines


_MAX_BLIND_SPOTS = 4  # lines; the JSON report has them all


def _blind_spot_lines(diagnosis: Diagnosis, console: Console) -> None:
    spots = diagnosis.blind_spots
    for spot in spots[:_MAX_BLIND_SPOTS]:
        _wrapped(console, Text("Not measured: ", style="yellow").append(spot.describe()))
    if len(spots) > _MAX_BLIND_SPOTS:
        more = len(spots) - _MAX_BLIND_SPOTS
        _wrapped(console, Text(f"(+{more} more not measured: --json)", style="dim"))


def render(diagnosis: Diagnosis, console: Console) -> None:
    """Print the one-screen summary of a diagnosis."""
    _wrapped(console, Text(_header(diagnosis)))
    if not diagnosis.complete:
        _wrapped(
            console,
            Text("(the recording is incomplete: gpuwhy stopped before the job)", style="dim"),
        )
    nodes = diagnosis.meta.get("nodes")
    if isinstance(nodes, list) and len(nodes) > 1:
        _wrapped(console, Text(_nodes_line(nodes), style="dim"))
    _wrapped(console, Text("Verdict: ", style="bold").append(verdict(diagnosis)))
    _wrapped(console, _phase_table(diagnosis.phases))
    for note in (one_time.line(diagnosis.phases), _stall_line(diagnosis)):
        if note:
            _wrapped(console, Text(note, style="dim"))
    _blind_spot_lines(diagnosis, console)
    _rank_section(diagnosis, console)
    if diagnosis.kernels is not None:
        console.print(Text("Kernel level (from the trace)", style="bold underline"))
        for text in _kernel_lines(diagnosis.kernels):
            _wrapped(console, Text(text))
    if diagnosis.findings:
        console.print(Text("Findings, most valuable first", style="bold underline"))
        for number, finding in enumerate(diagnosis.findings, 1):
            _finding(console, number, finding)
    else:
        _wrapped(console, Text("No runtime findings."))
    shown = environment_problems(diagnosis)
    if shown:
        console.print(Text("Environment (details: gpuwhy doctor)", style="bold underline"))
        for finding in shown:
            line = Text(
                f"{finding.severity.value.upper()} {finding.code}", style=_STYLE[finding.severity]
            )
            _wrapped(console, line.append(f": {finding.title}"))
        _wrapped(console, Text(f"fix: {shown[0].fix}", style="dim"), _INDENT)
    hidden = len(diagnosis.environment_findings) - len(shown)
    if hidden:
        _wrapped(
            console, Text(f"(+{hidden} more environment findings: gpuwhy doctor)", style="dim")
        )
