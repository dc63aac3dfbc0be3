"""A time as people read it, one form in every report and finding title."""

from __future__ import annotations

import math


def seconds(value: float | None) -> str:
    """25 µs, 1.2 ms, 340 ms, 12.5 s, 4 min 05 s, 1 h 02 min; "–" for none."""
    if value is None or not math.isfinite(value):
        return "–"
    if 0 < value < 0.0001:  # an asynchronous step's dispatch: tens of µs, not "0.0 ms"
        return f"{value * 1e6:.0f} µs"
    if value < 0.1:
        return f"{value * 1000:.1f} ms"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    minutes, secs = divmod(round(value), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
