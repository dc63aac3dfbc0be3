"""What each fix should buy, estimated from the baseline run alone, before it is measured.

The INPUT_BOUND finding gives the share `f` of a steady step spent waiting for its input; the
rest of the step, `1 - f` (in units of the step as written), is the step's own work. How long
the input takes to make one batch, `L`, depends on whether it already overlapped the steps:

- made in the training process between steps (a DataLoader without workers, a tf.data
  pipeline with no prefetch at its end): the step waited for all of it, `L = f`;
- made beside the steps (a prefetch at the end, written or appended by tf.data itself, or
  loader workers): an input-bound loop waits only for what the step's own work did not cover,
  and the input is busy the whole step, `L = 1`.

With `k` batches made at once, beside the steps, a batch costs `max(1 - f, L / k)` — the step's
own work or the input's, whichever is slower:

- `num_workers=n`: `n` loader processes (references.md#torch-dataloader), `k = n` over the job's
  own workers (or 1, its training process). Their reads mostly wait on storage, not on a core,
  so `k` counts whole (a loader that computes, decoding images say, gains less on fewer cores);
- tf.data `map(num_parallel_calls=AUTOTUNE)`: tf.data runs at most as many calls at once as
  the process may use cores (its CPU budget, references.md#tf-data-defaults);
- `prefetch`: one batch made during the step (`k = 1`); none to gain where the input already
  overlapped (tf.data's default `inject_prefetch` appends one itself).

The finding's own speed-up, the wait gone altogether, is the ceiling of all of them. Fixes of
other kinds (pinned memory, steps per execution) get no estimate: nothing in a run without
kernel traces measures what they remove.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuwhy.cores import usable_cores
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


def loaders_at_once(settings: Mapping[str, Any], seen: Seen, cpu_count: int) -> float | None:
    """How many times as many batches the fixed input makes at once as the job's own, or None
    if the fix is not of the input."""
    workers = settings.get("torch.num_workers")
    current = int(seen.values.get("torch.num_workers") or 0)
    if isinstance(workers, int) and workers > current:
        return workers / max(current, 1)  # no workers: the training process, one at a time
    if settings.get("tf.parallel_map"):
        return max(1, cpu_count)
    if settings.get("tf.prefetch"):
        return 0 if input_overlapped(settings, seen) else 1
    return None


def input_overlapped(settings: Mapping[str, Any], seen: Seen) -> bool:
    """Whether the job's input, as written, already made its batches beside the steps."""
    if any(key.startswith("torch.") for key in settings):
        return int(seen.values.get("torch.num_workers") or 0) > 0
    # tf.data: a prefetch at the end, the job's own (none missing) or appended by tf.data
    return seen.saw("tf.prefetch_injected") or not seen.saw("tf.no_prefetch")


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
    at_once = loaders_at_once(settings, seen, cpu_count or usable_cores() or 1)
    if at_once is None:
        return None
    if at_once == 0:
        return 1.0
    load = 1.0 if input_overlapped(settings, seen) else fraction
    return round(1.0 / max(1.0 - fraction, load / at_once), 2)
