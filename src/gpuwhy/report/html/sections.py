"""The report's server-rendered sections: verdict, phases with their GPU use, findings.

These read without JavaScript (an e-mail preview shows them); only the timeline is drawn by the
page's script. Every value is escaped through format.esc.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence

from gpuwhy.analysis import Diagnosis, PhaseStats
from gpuwhy.analysis.ranks import RankPhase
from gpuwhy.durations import seconds
from gpuwhy.model import Finding
from gpuwhy.redact import redact_command
from gpuwhy.report import one_time
from gpuwhy.report.html.format import esc, evidence_rows, percent, with_code
from gpuwhy.report.html.phases import phase_colors
from gpuwhy.report.verdict import verdict


def command_text(command: Sequence[str], *, raw: bool = False) -> str:
    """The command as a shell line, secrets masked unless it was recorded raw on purpose
    (`gpuwhy run --no-redact`, then said so); not escaped: callers escape."""
    if not command:
        return "(command not recorded)"
    if raw:
        return f"{shlex.join(command)}  (not redacted: recorded with --no-redact)"
    return shlex.join(redact_command(command))


def header(diagnosis: Diagnosis) -> str:
    """Title, verdict, command and the run's key facts."""
    facts = [f"{seconds(diagnosis.duration_s)} wall time"]
    if diagnosis.exit_code is not None:
        facts.append(f"exit code {diagnosis.exit_code}")
    if diagnosis.framework and diagnosis.framework != "unknown":
        facts.append(f"framework: {diagnosis.framework}")
    recorded = sum(1 for d in diagnosis.devices if d.samples)
    facts.append(f"{recorded} GPU{'s' if recorded != 1 else ''} recorded")
    notes = []
    if not diagnosis.complete:
        notes.append(
            '<p class="note warn">The recording is incomplete: gpuwhy stopped before '
            "the job (or the job is still running).</p>"
        )
    for spot in diagnosis.blind_spots:
        notes.append(f'<p class="note warn">Not measured: {esc(spot.describe())}</p>')
    provenance = diagnosis.meta.get("provenance")
    if isinstance(provenance, str) and provenance:
        notes.append(f'<p class="note">Provenance: {esc(provenance)}</p>')
    return (
        '<header class="top"><h1>gpuwhy report</h1>'
        f'<p class="verdict" id="verdict">{esc(verdict(diagnosis))}</p>'
        f'<p class="command"><code id="command">'
        f"{esc(command_text(diagnosis.command, raw=diagnosis.command_raw))}</code>"
        f'</p><p class="facts">{esc(" · ".join(facts))}</p>{"".join(notes)}'
        '<nav><a href="#timeline">Timeline</a><a href="#phases">Phases</a>'
        '<a href="#findings">Findings</a><a href="#environment">Environment</a>'
        '<a href="#run">Run</a></nav></header>'
    )


def _bar(fraction: float, color: str) -> str:
    width = max(0.0, min(fraction, 1.0)) * 100
    return f'<span class="bar"><i style="width:{width:.1f}%;background:{color}"></i></span>'


def _gpu_use(values: Mapping[int, float] | None, scale: float, unit: str) -> str:
    if not values:
        return "–"
    lines = []
    for device, value in sorted(values.items()):
        if not math.isfinite(value):
            continue
        lines.append(
            f'<span class="use"><span class="dev">{esc(device)}</span>'
            f"{_bar(value / scale, '#3b7dd8')}"
            f'<span class="val">{esc(f"{value * 100 / scale:.0f}")} {unit}</span>'
            "</span>"
        )
    return "".join(lines) or "–"


def _one_time_cell(phase: PhaseStats) -> str:
    """The phase's one-time seconds; its parts (warm-up, retraces...) as the cell's tooltip."""
    if not phase.steps:
        return '<td class="num"></td>'
    detail = "; ".join(one_time.parts(phase))
    tip = f' title="{esc(detail)}"' if detail else ""
    return f'<td class="num"{tip}>{esc(seconds(phase.one_time_s))}</td>'


def _phase_row(phase: PhaseStats, color: str) -> str:
    steps = phase.steps or ""
    cells = [
        f'<th scope="row"><span class="swatch" style="background:{color}"></span>'
        f'<span class="phase-name">{esc(phase.name)}</span></th>',
        f'<td class="num">{esc(seconds(phase.time_s))}</td>',
        f'<td class="num share">{_bar(phase.share, color)}{esc(percent(phase.share))}</td>',
        f'<td class="num">{esc(steps)}</td>',
        _one_time_cell(phase),
        f'<td class="num">{esc(seconds(phase.step_time_p50_s)) if phase.steps else ""}</td>',
        f'<td class="num">{esc(seconds(phase.step_time_p95_s)) if phase.steps else ""}</td>',
        f'<td class="num">{esc(percent(phase.data_wait_fraction))}</td>',
        f'<td class="gpu">{_gpu_use(phase.gpu_util_pct, 100.0, "%")}</td>',
        f'<td class="gpu">{_gpu_use(phase.sm_active, 1.0, "%")}</td>',
    ]
    kind = ' class="pseudo"' if phase.is_pseudo else ""
    return f'<tr{kind} data-phase="{esc(phase.name)}">{"".join(cells)}</tr>'


def phases(diagnosis: Diagnosis) -> str:
    """The phase table: time, share, steps, step times, data wait and GPU use per phase."""
    colors = phase_colors(diagnosis.phases)
    rows = [_phase_row(phase, colors[name]) for name, phase in diagnosis.phases.items()]
    head = "".join(
        f'<th scope="col">{h}</th>'
        for h in (
            "phase",
            "time",
            "share of run",
            "steps",
            "one-time",
            "step p50",
            "step p95",
            "data wait",
            "GPU utilization",
            "SM active",
        )
    )
    return (
        '<section id="phases"><h2>Phases</h2>'
        '<p class="hint">GPU use is the mean over each phase\'s time, per GPU (NVML index); '
        "“one-time” is the phase's time outside its steady steps (warm-up steps: tracing, "
        "compiling, input start-up; calls that traced or compiled the step again; time before the "
        "first step and after the last); step times and “data wait”, the share of time the steps "
        "waited for input, are of the steady steps; “other” is run time no phase covers "
        "(start-up, imports, saving).</p>"
        f'<div class="scroll"><table class="phases"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>{_one_time_note(diagnosis)}</section>"
    )


def _one_time_note(diagnosis: Diagnosis) -> str:
    """Under the table, as in the terminal: each phase's one-time work, where it is large."""
    text = one_time.line(diagnosis.phases)
    return f'<p class="note" id="one-time">{esc(text)}</p>' if text else ""


def _rank_row(row: RankPhase) -> str:
    gpu = ""
    if row.device is not None:
        util = f" · {percent(row.gpu_util_pct / 100)}" if row.gpu_util_pct is not None else ""
        gpu = f"{row.device}{util}"
    cells = [
        f'<th scope="row">{esc(row.label)}</th>',
        f"<td>{esc(row.host or '')}</td>",
        f'<td class="num">{esc(row.pid if row.pid is not None else "")}</td>',
        f'<td class="num">{esc(row.steps)}</td>',
        f'<td class="num">{esc(seconds(row.step_time_p50_s))}</td>',
        f'<td class="num">{esc(seconds(row.step_time_p95_s))}</td>',
        f'<td class="num">{esc(seconds(row.wait_per_step_s))}</td>',
        f'<td class="num">{esc(percent(row.wait_fraction))}</td>',
        f'<td class="num">{esc(gpu)}</td>',
    ]
    return f'<tr data-rank="{esc(row.label)}">{"".join(cells)}</tr>'


def ranks(diagnosis: Diagnosis) -> str:
    """Per phase that several processes stepped in, a row per rank (docs/distributed.md)."""
    if not diagnosis.ranks:
        return ""
    head = "".join(
        f'<th scope="col">{h}</th>'
        for h in (
            "rank",
            "host",
            "pid",
            "steps",
            "step p50",
            "step p95",
            "wait/step",
            "wait",
            "GPU",
        )
    )
    tables = "".join(
        f"<h3>{esc(phase)} ({len(rows)} ranks)</h3>"
        f'<div class="scroll"><table class="phases ranks"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(_rank_row(row) for row in rows)}</tbody></table></div>"
        for phase, rows in diagnosis.ranks.items()
    )
    return (
        '<section id="ranks"><h2>Ranks</h2>'
        '<p class="hint">Each data-parallel rank\'s own steps; “wait/step” is the time it waited '
        "for its own input per steady step. Ranks in lockstep share one step time: a rank that "
        "waits long for its input makes the others wait for it inside the collective.</p>"
        f"{tables}</section>"
    )


def _finding(number: int, finding: Finding, prefix: str) -> str:
    severity = finding.severity.value
    speedup = ""
    if finding.speedup is not None and math.isfinite(finding.speedup):
        speedup = f'<span class="speedup">≈ {finding.speedup:.2f}× faster if fixed</span>'
    parts = [
        f'<article class="finding sev-{esc(severity)}" id="{prefix}-{number}" '
        f'data-code="{esc(finding.code)}">',
        f'<header><span class="badge {esc(severity)}">{esc(severity.upper())}</span>'
        f'<span class="code">{esc(finding.code)}</span>{speedup}</header>',
        f"<h3>{esc(finding.title)}</h3>",
    ]
    rows = evidence_rows(finding.evidence)
    if rows:
        parts.append(f'<table class="evidence"><caption>Evidence</caption>{rows}</table>')
    if finding.fix:
        parts.append(f'<div class="fix"><h4>Fix</h4><p>{with_code(finding.fix)}</p></div>')
    if finding.speedup_method:
        parts.append(f'<p class="method">Speed-up estimate: {esc(finding.speedup_method)}</p>')
    reference = finding.evidence.get("reference")
    if reference:
        parts.append(f'<p class="ref">Threshold from: {esc(reference)}</p>')
    parts.append("</article>")
    return "".join(parts)


def _whatif(findings: Sequence[Finding]) -> str:
    gains = [
        f
        for f in findings
        if f.speedup is not None and math.isfinite(f.speedup) and f.speedup > 1.0
    ]
    if not gains:
        return ""
    top = max(f.speedup or 1.0 for f in gains)
    rows = []
    for finding in gains:
        gain = finding.speedup or 1.0
        fraction = (gain - 1.0) / (top - 1.0) if top > 1.0 else 1.0
        rows.append(
            f'<li><span class="code">{esc(finding.code)}</span>'
            f'{_bar(fraction, "#27ae60")}<span class="val">≈ {gain:.2f}×</span></li>'
        )
    return (
        '<div class="whatif"><h3>What each fix buys (estimated whole-run speed-up)</h3>'
        f"<ul>{''.join(rows)}</ul></div>"
    )


def findings(diagnosis: Diagnosis) -> str:
    """The runtime findings, most valuable first, with a what-if summary above them."""
    if not diagnosis.findings:
        body = '<p class="none">No runtime findings.</p>'
    else:
        cards = "".join(_finding(i, f, "finding") for i, f in enumerate(diagnosis.findings, 1))
        body = _whatif(diagnosis.findings) + f'<div class="findings">{cards}</div>'
    return f'<section id="findings"><h2>Findings, most valuable first</h2>{body}</section>'


def environment(diagnosis: Diagnosis) -> str:
    """The environment's findings (the doctor's, for the job's interpreter)."""
    found = diagnosis.environment_findings
    if not found:
        body = '<p class="none">No environment findings.</p>'
    else:
        body = "".join(_finding(i, f, "env") for i, f in enumerate(found, 1))
    return (
        '<section id="environment"><h2>Environment</h2>'
        '<p class="hint">Checks of the machine and the job\'s Python (details: '
        f'<code>gpuwhy doctor</code>).</p><div class="findings">{body}</div></section>'
    )
