"""How much of a recording a trace carries: the time window, the counters' resolution, the spans.

A trace viewer loads the whole JSON into memory: every sample of a day on 8 GPUs (7 million,
17 counters each) and its two million step and input-wait spans would be gigabytes that no
browser opens. So an export picks, for the window asked for:

- counters: every sample while the window holds at most RAW_ROWS_MAX samples (half an hour
  of 8 GPUs at 10 Hz); beyond, the mean of each second from the recording's 1-s tier while the
  window holds at most SECOND_BUCKETS_MAX GPU-seconds (a few hours of 8 GPUs); beyond, the mean
  of each minute (the 1-min tier). A counter is written only when it changes.
- spans: every phase span; every step and input-wait span while the window holds at most
  SPANS_MAX of them, else per-process counters at the counters' resolution (1 s for raw):
  steps per second and the share of time waiting for input.

`--resolution raw` asks for every sample and every span whatever the size.

`--start/--end` export any window at full detail; the choice is recorded in the trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuwhy.model import NS_PER_S, SpanKind

if TYPE_CHECKING:
    from gpuwhy.recording.reader import Recording

RAW_ROWS_MAX = 300_000
"""GPU, driver-utilization and host samples written one by one up to this many (half an hour
of 8 GPUs at 10 Hz: about a million counter events, ~100 MB, ten-odd seconds)."""
SECOND_BUCKETS_MAX = 100_000
"""GPU-seconds (GPUs × seconds) written as 1-s means up to this many (3.5 h of 8 GPUs: about
a million counter events, ~100 MB); beyond, 1-min means (a day of 8 GPUs: ~25 MB)."""
SPANS_MAX = 250_000
"""Step and input-wait spans written one by one up to this many (~50 MB of trace)."""
RESOLUTIONS = {"raw": 0, "1s": NS_PER_S, "1min": 60 * NS_PER_S}


@dataclass(frozen=True)
class TracePlan:
    """What one export writes."""

    start_ns: int | None  # the window, None: unbounded
    end_ns: int | None
    counter_width_ns: int  # 0: every sample; else the mean of each bucket of this width
    every_span: bool  # steps and input waits one by one; else summarised as counters
    steps_and_waits: int  # at most this many in the window (whole blocks counted)

    @property
    def summary_width_ns(self) -> int:
        """Bucket width of the step and input-wait counters (when spans are summarised)."""
        return self.counter_width_ns or NS_PER_S

    def describe(self) -> dict[str, str]:
        """The choice in words, for the trace's metadata and the command's output."""
        if self.counter_width_ns == 0:
            counters = "every sample"
        else:
            width, tier = (
                ("second", "1-s") if self.counter_width_ns == NS_PER_S else ("minute", "1-min")
            )
            counters = f"the mean of each {width} (the recording's {tier} tier)"
        if self.every_span:
            spans = "every phase, step and input-wait span"
        else:
            spans = (
                f"phase spans; the ~{self.steps_and_waits:,} steps and input waits as "
                "per-process counters (steps per second, % of time waiting for input)"
            )
        return {
            "counters": counters,
            "spans": spans,
            "full_detail": "export a shorter window with --start/--end (seconds from the "
            "run's start) to get every sample and span",
        }


def plan_trace(
    recording: Recording, start_ns: int | None, end_ns: int | None, resolution: str = "auto"
) -> TracePlan:
    """The plan for the window [start_ns, end_ns) at `resolution` ("auto", "raw", "1s",
    "1min"); counting uses the stored blocks' row counts only (milliseconds)."""
    spans = recording.rows_at_most(
        "span", start_ns, end_ns, kind=SpanKind.STEP
    ) + recording.rows_at_most("span", start_ns, end_ns, kind=SpanKind.WAIT)
    if resolution != "auto":
        width = RESOLUTIONS[resolution]
    else:
        samples = sum(
            recording.rows_at_most(stream, start_ns, end_ns) for stream in ("gpu", "util", "host")
        )
        bounds = recording.time_range()
        low = start_ns if start_ns is not None else (bounds[0] if bounds else 0)
        high = end_ns if end_ns is not None else (bounds[1] + 1 if bounds else low)
        gpu_seconds = max(len(recording.devices), 1) * max(high - low, 0) / NS_PER_S
        width = (
            0
            if samples <= RAW_ROWS_MAX
            else NS_PER_S
            if gpu_seconds <= SECOND_BUCKETS_MAX
            else 60 * NS_PER_S
        )
    every_span = spans <= SPANS_MAX or resolution == "raw"  # "raw" asks for everything
    return TracePlan(start_ns, end_ns, width, every_span, spans)
