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
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuwhy.analysis import Diagnosis
from gpuwhy.errors import UsageError
from gpuwhy.report.html.format import esc, seconds
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

if TYPE_CHECKING:
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


def csp(script: str) -> str:
    """The page's Content-Security-Policy: the one inline script (by its hash), no request."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return (
        f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
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


def _page(diagnosis: Diagnosis, data: dict[str, Any], script: str, css: str, sections: str) -> str:
    names = [n for n, p in diagnosis.phases.items() if p.intervals or n == "data_wait"]
    if data["wait"] is None and "data_wait" in names:
        names.remove("data_wait")
    title = f"gpuwhy · {command_text(diagnosis.command, raw=diagnosis.command_raw)}"
    body = header(diagnosis) + _timeline_section(data, names) + sections
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp(script))}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{esc(title[:200])}</title><style>{css}</style></head>"
        f"<body><main>{body}<footer>Made by gpuwhy from the recording; this file needs no "
        "network and no other file.</footer></main>"
        f'<script type="application/json" id="{DATA_ELEMENT_ID}">'
        f"{script_json({'timeline': data})}</script>"
        f"<script>{script}</script></body></html>\n"
    )


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def render_html(diagnosis: Diagnosis, recording: Recording) -> str:
    """The whole page as text (deterministic for a given recording), under MAX_HTML_BYTES."""
    script, css = asset("timeline.js"), asset("report.css")
    sections = "".join(
        (
            phases(diagnosis),
            ranks(diagnosis),
            findings(diagnosis),
            environment(diagnosis),
            run_section(diagnosis),
        )
    )
    # The timeline gets what the rest of the page leaves of the size limit.
    fixed = sum(_utf8_size(part) for part in (script, css, sections, header(diagnosis)))
    budget = MAX_HTML_BYTES - fixed - PAGE_MARGIN_BYTES
    page = _page(
        diagnosis, timeline_data(diagnosis, recording, budget_bytes=budget), script, css, sections
    )
    overshoot = _utf8_size(page) - MAX_HTML_BYTES
    if overshoot > 0:  # an estimate fell short (very long texts): once more, with less
        budget -= overshoot + PAGE_MARGIN_BYTES
        page = _page(
            diagnosis,
            timeline_data(diagnosis, recording, budget_bytes=budget),
            script,
            css,
            sections,
        )
    return page


def write_html(diagnosis: Diagnosis, recording: Recording, path: str | os.PathLike[str]) -> None:
    """Write the HTML report to `path` (replaced whole: a reader never sees half a file).

    Raises UsageError (one line, with the fix) when the file cannot be written.
    """
    write_page_text(render_html(diagnosis, recording), path)


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
