"""The HTML report (`--html FILE`): one self-contained page, safe to open and to mail around.

Everything is inline: the stylesheet, the timeline's script (assets/) and the data, as JSON in a
`<script type="application/json">` block with `<`, `>` and `&` escaped, so no string inside it
can close the block. The tables and findings are rendered here, escaped, and read without the
script; the script only draws the timeline from the JSON. A Content-Security-Policy allows the one
inline script by its hash and forbids every network request, so the page works offline, and
markup that slipped into a value could not run even if it escaped escaping.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuwhy.analysis import Diagnosis
from gpuwhy.durations import seconds
from gpuwhy.errors import UsageError
from gpuwhy.report.html.format import esc
from gpuwhy.report.html.kernel_lanes import kernel_lanes
from gpuwhy.report.html.kernel_section import KERNELS_ELEMENT_ID, rank_sections
from gpuwhy.report.html.meta import run_section
from gpuwhy.report.html.phases import phase_colors
from gpuwhy.report.html.sections import (
    command_text,
    environment,
    findings,
    header,
    phases,
    ranks,
)
from gpuwhy.report.html.timeline import timeline_data
from gpuwhy.traces import RankTrace

if TYPE_CHECKING:
    from gpuwhy.analysis.workers import Workers
    from gpuwhy.recording.reader import Recording

MAX_HTML_BYTES = 5_000_000  # a report stays small enough to attach to an e-mail (issue: scale)
PAGE_MARGIN_BYTES = 100_000  # head, timeline section, legend; and escaping that grows text
DATA_ELEMENT_ID = "gpuwhy-data"


def asset(name: str) -> str:
    return (resources.files("gpuwhy.report.html") / "assets" / name).read_text(encoding="utf-8")


def script_json(data: Any) -> str:
    """JSON safe inside a <script> element: no `</script>`, `<!--` or `&` can form in it."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def csp(*scripts: str) -> str:
    """The page's Content-Security-Policy: its inline scripts (by their hashes), no request."""
    hashes = " ".join(
        "'sha256-{}'".format(
            base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
        )
        for script in scripts
    )
    return (
        f"default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )


def _timeline_section(data: dict[str, Any], names: list[str]) -> str:
    colors = phase_colors(names)
    legend = [f'<li><i style="background:{colors[n]}"></i>{esc(n)}</li>' for n in names]
    tiers = data["tiers"]
    period = data["period_s"]
    if data["raw"]:
        detail = f"Every sample is kept (one every {seconds(period)}): zoom in for full detail."
    else:
        detail = (
            f"Finest detail kept: one point per {seconds(tiers[0]['bucket_s'])} "
            f"(sampled every {seconds(period)}); shaded bands show the minimum and maximum "
            "inside each point. This keeps the file under 5 MB."
        )
    missing = data["devices_without_samples"]
    if missing:
        detail += f" No samples for GPU {', '.join(str(i) for i in missing)}."
    return (
        '<section id="timeline"><h2>Timeline</h2>'
        f'<p class="hint">{esc(detail)}</p>'
        f'<ul class="legend">{"".join(legend)}</ul>'
        '<div id="tl" class="timeline" tabindex="0" aria-label="timeline of the run">'
        '<noscript><p class="none">The timeline is drawn by the page\'s script; the tables '
        "below hold the same numbers.</p></noscript></div></section>"
    )


def kernels_block(lanes_json: str, script: str) -> str:
    """The kernel timelines' data (kernel_lanes, as script_json) and the script drawing them."""
    return (
        f'<script type="application/json" id="{KERNELS_ELEMENT_ID}">{lanes_json}</script>'
        f"<script>{script}</script>"
    )


def _window_section(diagnosis: Diagnosis, lanes: list[dict[str, Any] | None]) -> str:
    """The run's profiler window (`run --profile`): its cost, then the kernel-level ranks."""
    kernels = diagnosis.kernels
    if kernels is None:
        return ""
    window = kernels.window or {}
    facts = [f"{window['steps']} steps profiled"] if window.get("steps") else []
    if window.get("inside_over_outside"):
        facts.append(
            f"a step inside the window took {window['inside_over_outside']:.2f}x one outside "
            "(the profiler's cost)"
        )
    if window.get("path"):
        facts.append(f"trace: {window['path']}")
    return (
        '<section id="kernels"><h2>Profiler window</h2>'
        f'<p class="hint">{esc("; ".join(facts) or "The kernels of a few profiled steps.")}</p>'
        f"{rank_sections(kernels, lanes)}</section>"
    )


def _page(
    diagnosis: Diagnosis,
    data: dict[str, Any],
    scripts: tuple[str, str],
    css: str,
    sections: str,
    lanes_json: str | None,
) -> str:
    """``lanes_json``: the profiler window's kernel timelines, None where nothing is drawn."""
    script, kernels_script = scripts
    kernels_tail = "" if lanes_json is None else kernels_block(lanes_json, kernels_script)
    names = [n for n, p in diagnosis.phases.items() if p.intervals or n == "data_wait"]
    if data["wait"] is None and "data_wait" in names:
        names.remove("data_wait")
    title = f"gpuwhy · {command_text(diagnosis.command, raw=diagnosis.command_raw)}"
    body = header(diagnosis) + _timeline_section(data, names) + sections
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" '
        f'content="{esc(csp(script, kernels_script) if kernels_tail else csp(script))}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{esc(title[:200])}</title><style>{css}</style></head>"
        f"<body><main>{body}<footer>Made by gpuwhy from the recording; this file needs no "
        "network and no other file.</footer></main>"
        f'<script type="application/json" id="{DATA_ELEMENT_ID}">'
        f"{script_json({'timeline': data})}</script>"
        f"<script>{script}</script>{kernels_tail}</body></html>\n"
    )


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def render_html(
    diagnosis: Diagnosis,
    recording: Recording,
    traces: Sequence[RankTrace] = (),
    workers: Workers | None = None,
) -> str:
    """The whole page as text (deterministic for a given recording), under MAX_HTML_BYTES.
    ``traces``: the run's profiler window, whose kernels the page then draws too; ``workers``
    draw the GPUs' lanes (timeline.py)."""
    scripts = asset("timeline.js"), asset("kernels.js")
    css = asset("report.css")
    lanes = kernel_lanes(traces) if traces and diagnosis.kernels is not None else []
    sections = "".join(
        (
            phases(diagnosis),
            ranks(diagnosis),
            findings(diagnosis),
            _window_section(diagnosis, lanes),
            environment(diagnosis),
            run_section(diagnosis),
        )
    )
    lanes_json = script_json(lanes) if any(lanes) else None
    # The timeline gets what the rest of the page leaves of the size limit.
    parts = (*scripts, css, sections, header(diagnosis), lanes_json or "")
    budget = MAX_HTML_BYTES - sum(_utf8_size(part) for part in parts) - PAGE_MARGIN_BYTES

    def page_within(budget: int) -> str:
        data = timeline_data(diagnosis, recording, budget_bytes=budget, workers=workers)
        return _page(diagnosis, data, scripts, css, sections, lanes_json)

    page = page_within(budget)
    overshoot = _utf8_size(page) - MAX_HTML_BYTES
    if overshoot > 0:  # an estimate fell short (very long texts): once more, with less
        page = page_within(budget - overshoot - PAGE_MARGIN_BYTES)
    return page


def write_html(
    diagnosis: Diagnosis,
    recording: Recording,
    path: str | os.PathLike[str],
    traces: Sequence[RankTrace] = (),
    workers: Workers | None = None,
) -> None:
    """Write the HTML report to `path` (replaced whole: a reader never sees half a file).

    Raises UsageError (one line, with the fix) when the file cannot be written.
    """
    write_page_text(render_html(diagnosis, recording, traces, workers), path)


def write_page_text(text: str, path: str | os.PathLike[str]) -> None:
    """Write a page to `path`, replacing it whole; UsageError when it cannot be written."""
    target = Path(path)
    try:
        handle, temporary = tempfile.mkstemp(
            prefix=".gpuwhy-", suffix=".html.tmp", dir=target.parent if str(target.parent) else "."
        )
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                file.write(text)
            os.chmod(temporary, 0o644)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as error:
        raise UsageError(
            f"cannot write the HTML report {target}: {error.strerror or error}",
            "check that the folder exists and is writable",
        ) from error
