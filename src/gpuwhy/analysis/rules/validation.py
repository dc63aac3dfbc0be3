"""SLOW_VALIDATION: validation takes a large share of the training loop's time.

Threshold: no peer publishes one for validation; we apply XProf's "highly bound" band (20 %,
references.md#xprof-input-pipeline) to the share of the training loop (train + validation time) that
validation takes. A validation set about a fifth the size of the training set, run every epoch
forward-only, costs well under that, so crossing it means validation is too large, too frequent or
too slow.
"""

from __future__ import annotations

from gpuwhy.analysis import whatif
from gpuwhy.analysis.context import RunContext
from gpuwhy.analysis.framework import pick
from gpuwhy.analysis.rules.common import r
from gpuwhy.durations import seconds
from gpuwhy.model import Finding, Severity

VALIDATION = "validation"
SHARE_THRESHOLD = 0.20
REFERENCE = "XProf's 20 % 'highly bound' band applied to validation's share of train + validation"

FIXES = {
    "keras": (
        "Validate less often or on less: `model.fit(..., validation_freq=N)` (every N epochs), "
        "`validation_steps=K` (a subset), a larger `validation_batch_size`; and `.cache()` / "
        "`.prefetch(tf.data.AUTOTUNE)` the validation dataset."
    ),
    "lightning": (
        "Validate less often or on less: `Trainer(check_val_every_n_epoch=N, "
        "limit_val_batches=0.25)`, and a larger validation batch size."
    ),
    "torch": (
        "Validate every N epochs or on a fixed subset, under `torch.inference_mode()` with a "
        "larger batch size and a validation DataLoader with `num_workers>0`."
    ),
    "default": (
        "Validate every N epochs or on a representative subset, with a larger batch size and the "
        "same prefetching as the training input."
    ),
}


def check(ctx: RunContext) -> list[Finding]:
    validation = ctx.phases.get(VALIDATION)
    train = ctx.training_phase()
    if validation is None or train is None or train.name == VALIDATION:
        return []
    loop_s = train.time_s + validation.time_s
    share = validation.time_s / loop_s if loop_s > 0 else 0.0
    if share < SHARE_THRESHOLD:
        return []
    # One per pass, and the time from its end until training resumed: Keras (and most loops)
    # tear the evaluation down after its last batch, a cost paid once per validation round.
    rounds = [(end - start) / 1e9 for start, end in validation.intervals]
    resume = list(validation.resume_s) or [0.0] * len(rounds)
    est = whatif.fewer_validation_rounds(ctx.duration_s, rounds or [validation.time_s], resume)
    per_step = (
        validation.step_time_p50_s / train.step_time_p50_s
        if validation.step_time_p50_s and train.step_time_p50_s
        else None
    )
    evidence = {
        "validation_time_s": r(validation.time_s),
        "train_time_s": r(train.time_s),
        "validation_share_of_loop": r(share),
        "validation_share_of_run": r(validation.share),
        "validation_rounds": validation.rounds,
        "validation_round_s": [r(x) for x in rounds],
        "validation_resume_s": [r(x) for x in resume],
        "validation_steps": validation.steps,
        "train_steps": train.steps,
        "validation_to_train_step_time": r(per_step),
        "validation_data_wait_fraction": r(validation.data_wait_fraction),
        "threshold_share": SHARE_THRESHOLD,
        "reference": REFERENCE,
    }
    return [
        Finding(
            code="SLOW_VALIDATION",
            severity=Severity.WARNING,
            title=(
                f"Validation takes {share:.0%} of the training loop "
                f"({seconds(validation.time_s)} vs {seconds(train.time_s)} of training)"
            ),
            evidence=evidence,
            fix=pick(ctx.framework, FIXES),
            speedup=est.speedup,
            speedup_method=est.method,
        )
    ]
