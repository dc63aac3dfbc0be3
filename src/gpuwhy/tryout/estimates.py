"""What each fix should buy, estimated from the baseline run alone, before it is measured.

The INPUT_BOUND finding gives the share `f` of a steady step spent waiting for its input. The
input is made where the wait was (in the training process, one batch at a time), so a batch
costs `1` (wait `f` plus the rest `1 - f`); with `k` batches made at once, beside the steps, it
costs `max(1 - f, f / k)` — the steps' own work, or the input's, whichever is slower:

- `num_workers=k`: `k` loader processes (references.md#torch-dataloader). Their reads mostly
  wait on storage, not on a core, so `k` counts whole (a loader that computes, decoding images
  say, gains less on fewer cores);
- tf.data `map(num_parallel_calls=AUTOTUNE)`: tf.data runs at most as many calls at once as
  the process may use cores (its CPU budget, references.md#tf-data-defaults);
- `prefetch`: one batch made during the step (`k = 1`), unless tf.data already appends one
  itself (its default `inject_prefetch` optimisation): then nothing to gain.

The finding's own speed-up, the wait gone altogether, is the ceiling of all of them. Fixes of
other kinds (pinned memory, steps per execution) get no estimate: nothing in a run without
kernel traces measures what they remove.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from gpuwhy.model import Finding
from gpuwhy.tryout.candidates import Seen


def wait_fraction(findings: Sequence[Finding]) -> float | None:
    """The steady steps' input-wait share from the INPUT_BOUND finding, if any."""
    for finding in findings:
        if finding.code == "INPUT_BOUND":
            value = finding.evidence.get("data_wait_fraction")
            if isinstance(value, (int, float)) and 0.0 <= value < 1.0:
                return float(value)
    return None


def loaders_at_once(settings: Mapping[str, Any], seen: Seen, cpu_count: int) -> int | None:
    """How many batches the fixed input makes at once, or None if the fix is not of the input."""
    workers = settings.get("torch.num_workers")
    if isinstance(workers, int) and workers > int(seen.values.get("torch.num_workers") or 0):
        return workers
    if settings.get("tf.parallel_map"):
        return max(1, cpu_count)
    if settings.get("tf.prefetch"):
        return 0 if seen.saw("tf.prefetch_injected") else 1
    return None


def estimate(
    settings: Mapping[str, Any],
    findings: Sequence[Finding],
    seen: Seen,
    *,
    cpu_count: int | None = None,
) -> float | None:
    """The estimated speed-up of the measured phase's steps with `settings`, or None."""
    fraction = wait_fraction(findings)
    if fraction is None:
        return None
    at_once = loaders_at_once(settings, seen, cpu_count or os.cpu_count() or 1)
    if at_once is None:
        return None
    if at_once == 0:
        return 1.0
    return round(1.0 / max(1.0 - fraction, fraction / at_once), 2)
