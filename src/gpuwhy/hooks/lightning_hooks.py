"""PyTorch Lightning: a callback for phases and steps, and the patch that adds it to `Trainer`.

Hook names and signatures follow `lightning.pytorch.callbacks.Callback` (Lightning 2.x; the
older `pytorch_lightning` package has the same ones). Lightning fetches a batch before
`on_*_batch_start`; that fetch goes through torch's DataLoader, whose hook times it, and the
step it belongs to begins with the fetch. Phases: "train", "validation" (inside fit, the sanity
check included), "evaluate" (`validate`/`test`), "predict".
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from typing import Any, cast

from gpuwhy.hooks import emitter, patching, tracker

_safe = emitter.guarded("Lightning")


def _eval_phase(trainer: Any) -> str:
    fn = getattr(getattr(trainer, "state", None), "fn", None)
    return "validation" if str(getattr(fn, "value", fn)) == "fit" else "evaluate"


class LightningSpans:
    """The callback's behaviour; `callback_class()` mixes it into Lightning's `Callback`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._depths: list[int] = []

    def _enter(self, phase: str) -> None:
        st = tracker.state()
        st.framework += 1
        self._depths.append(tracker.push_phase(phase, tracker.clock()))

    def _leave(self) -> None:
        if self._depths:
            tracker.unwind(self._depths.pop(), tracker.clock())
            st = tracker.state()
            st.framework = max(0, st.framework - 1)

    @_safe
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._enter("train")

    @_safe
    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._leave()

    @_safe
    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._enter(_eval_phase(trainer))

    @_safe
    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        self._leave()

    @_safe
    def on_test_start(self, trainer: Any, pl_module: Any) -> None:
        self._enter("evaluate")

    @_safe
    def on_test_end(self, trainer: Any, pl_module: Any) -> None:
        self._leave()

    @_safe
    def on_predict_start(self, trainer: Any, pl_module: Any) -> None:
        self._enter("predict")

    @_safe
    def on_predict_end(self, trainer: Any, pl_module: Any) -> None:
        self._leave()

    @_safe
    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        tracker.end_step(tracker.clock())

    @_safe
    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        while self._depths:
            self._leave()

    @_safe
    def on_train_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        tracker.begin_step(tracker.clock())

    @_safe
    def on_validation_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        tracker.begin_step(tracker.clock())

    @_safe
    def on_test_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        tracker.begin_step(tracker.clock())

    @_safe
    def on_predict_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        tracker.begin_step(tracker.clock())


_CALLBACK_MODULES = ("lightning.pytorch.callbacks", "pytorch_lightning.callbacks")


def _lightning_callback_base() -> type:
    """Lightning's `Callback`: from the package the job already imported, else either one."""
    loaded = [sys.modules[name] for name in _CALLBACK_MODULES if name in sys.modules]
    for module in loaded or _CALLBACK_MODULES:
        try:
            found = importlib.import_module(module) if isinstance(module, str) else module
        except ImportError:
            continue
        return cast(type, found.Callback)
    raise ImportError("Lightning is not installed (neither lightning nor pytorch_lightning)")


_classes: dict[type, type] = {}


def callback_class(base: type | None = None) -> type:
    """The gpuwhy Lightning callback class (`gpuwhy.LightningCallback`)."""
    base = base or _lightning_callback_base()
    cls = _classes.get(base)
    if cls is None:
        doc = "Records Lightning phases and steps for gpuwhy (O(1) per batch, no device sync)."
        cls = _classes[base] = type(
            "LightningCallback", (LightningSpans, base), {"__module__": __name__, "__doc__": doc}
        )
    return cls


def install(lightning_pytorch: Any) -> None:
    """Add the callback to every `Trainer` (unless one is already in its callbacks)."""
    trainer = getattr(lightning_pytorch, "Trainer", None)
    base = getattr(getattr(lightning_pytorch, "callbacks", None), "Callback", None)
    if trainer is None or base is None:
        emitter.report_once("lightning.layout", "Lightning not hooked: no Trainer/Callback")
        return

    def make(original: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(original)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            try:
                given = kwargs.get("callbacks")
                callbacks = [given] if isinstance(given, base) else list(given or ())
                if not any(isinstance(c, LightningSpans) for c in callbacks):
                    kwargs["callbacks"] = [callback_class(base)(), *callbacks]
            except Exception as error:
                emitter.report_once(
                    "lightning.callbacks", f"Lightning callback not added: {error!r}"
                )
            original(self, *args, **kwargs)

        return __init__

    patching.patch(trainer, "__init__", make)
