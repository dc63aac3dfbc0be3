"""One form for a time, in the terminal, the HTML report and the findings' titles alike."""

from __future__ import annotations

import math

import pytest

from gpuwhy.durations import seconds


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "–"),
        (math.nan, "–"),
        (0.0, "0.0 ms"),
        (0.00004, "40 µs"),  # an asynchronous step's dispatch, not "0.0 ms"
        (0.0012, "1.2 ms"),
        (0.0291, "29.1 ms"),
        (0.34, "340 ms"),
        (12.54, "12.5 s"),
        (245, "4 min 05 s"),
        (3720, "1 h 02 min"),
    ],
)
def test_a_time_reads_in_the_unit_that_keeps_its_digits(value: float | None, text: str) -> None:
    assert seconds(value) == text
