"""Hugging Face `Trainer`: its phases, so that its evaluation loop is not taken for training.

`Trainer.train` is the "train" phase, `Trainer.evaluate` is "validation" inside it (evaluation
each epoch, `eval_strategy`) and "evaluate" on its own, `Trainer.predict` is "predict". Steps
inside them are the DataLoader pulls the Trainer makes (torch's hooks), as in any plain loop.
Method names follow transformers 4.x and 5.x.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from gpuwhy.hooks import emitter, patching, tracker

METHODS = ("train", "evaluate", "predict")  # each the phase of its name, but one:


def _phase_name(method: str) -> str:
    """`evaluate` called from inside `train` is the run's validation."""
    inside_train = any(segment[0] == "train" for segment in tracker.state().phases)
    return tracker.VALIDATION if method == "evaluate" and inside_train else method


def _in_phase(method: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            depth = _safe(lambda: tracker.push_phase(_phase_name(method), tracker.clock()))
            try:
                return original(*args, **kwargs)
            finally:
                if depth is not None:
                    _safe(lambda: tracker.unwind(depth, tracker.clock()))

        return wrapper

    return make


def _safe(action: Callable[[], Any]) -> Any:
    """The hook's own bookkeeping: a failure is reported once, never raised into the Trainer
    (which then runs unobserved rather than not at all)."""
    try:
        return action()
    except Exception as error:
        emitter.report_once("transformers", f"Trainer hook failed: {error!r}")
        return None


def install(trainer_module: Any) -> None:
    """Wrap `Trainer.train`, `evaluate` and `predict` of `transformers.trainer`."""
    trainer = getattr(trainer_module, "Trainer", None)
    if trainer is None:
        emitter.report_once("transformers", "Trainer not hooked: module layout changed")
        return
    for method in METHODS:
        if callable(getattr(trainer, method, None)):
            patching.patch(trainer, method, _in_phase(method))
