"""Escaping and number formatting shared by the HTML report's sections.

Every piece of text that reaches the page goes through `esc` (phase names, commands, paths,
evidence values, device names): nothing a user or a recording supplies is ever markup.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping
from typing import Any

from gpuwhy.durations import seconds

_MAX_VALUE_CHARS = 400  # evidence values are numbers and short facts; cap what a page repeats


def esc(value: object) -> str:
    """Text for HTML content or a quoted attribute: &, <, >, " and ' escaped."""
    return html.escape(str(value), quote=True)


def with_code(text: str) -> str:
    """Escaped text whose `backticked` parts become <code> (how fixes write their snippets)."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: show the text as written
        return esc(text)
    return "".join(f"<code>{esc(p)}</code>" if i % 2 else esc(p) for i, p in enumerate(parts))


def percent(fraction: float | None, digits: int = 0) -> str:
    """A 0..1 fraction as a percentage."""
    if fraction is None or not math.isfinite(fraction):
        return "–"
    return f"{fraction * 100:.{digits}f} %"


def size(value: float | None) -> str:
    """Bytes in binary units."""
    if value is None or not math.isfinite(value):
        return "–"
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= factor:
            return f"{value / factor:.1f} {unit}"
    return f"{value:.0f} B"


def number(value: float) -> str:
    """A compact number: integers as they are, others to 4 significant digits."""
    if isinstance(value, int) or (math.isfinite(value) and float(value).is_integer()):
        return f"{int(value):,}".replace(",", " ")
    return f"{value:.4g}"


def evidence_value(key: str, value: Any) -> str:
    """A finding's evidence value as plain text, in the unit its key names."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        if key.endswith("_bytes"):
            return f"{size(value)} ({number(value)} B)"
        if key.endswith(("_fraction", "_share")) or key == "share":
            return f"{percent(value, 1)} ({number(value)})"
        if key.endswith("_s"):
            return seconds(value)
        if key.endswith("_pct"):
            return f"{number(value)} %"
        return number(value)
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 1] + "…"


def evidence_rows(evidence: Mapping[str, Any]) -> str:
    """The evidence of a finding as escaped table rows (the reference goes elsewhere)."""
    rows = []
    for key, value in evidence.items():
        if key == "reference":
            continue
        rows.append(
            f'<tr><th scope="row"><code>{esc(key)}</code></th>'
            f"<td>{esc(evidence_value(str(key), value))}</td></tr>"
        )
    return "".join(rows)
