"""Which fixes `gpuwhy try` tries: chosen from the baseline's findings and from what its hooks saw.

A fix is a set of settings the job's hooks apply in-process (hooks/try_fixes.py). The catalog
below is the whole vocabulary; `--fix SETTING[=VALUE][,SETTING…]` names a fix by hand. A fix
that could change the training's results (element order, batch size, precision) is only tried
when the user allows it, and says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuwhy.cores import usable_cores
from gpuwhy.errors import UsageError
from gpuwhy.model import Finding

# setting -> (type of its value, the default when named without a value, opt-in flag or None)
SETTINGS: dict[str, tuple[type, Any, str | None]] = {
    "torch.num_workers": (int, 4, None),
    "torch.pin_memory": (bool, True, None),
    "torch.persistent_workers": (bool, True, None),
    "torch.prefetch_factor": (int, 4, None),
    "tf.parallel_map": (bool, True, None),
    "tf.prefetch": (bool, True, None),
    "tf.deterministic": (bool, False, "--allow-reorder"),
    "keras.steps_per_execution": (int, 8, None),
    "batch.scale": (int, 2, "--allow-batch-size"),
    "keras.mixed_precision": (bool, True, "--allow-precision"),
}

INPUT_CODES = frozenset({"INPUT_BOUND"})
HOST_CODES = frozenset({"HOST_BOUND", "LAUNCH_BOUND"})

STEPS_PER_EXECUTION = (4, 16)
"""Keras `steps_per_execution` values tried on a host-bound job: one compiled call per 4 or 16
batches instead of one, which removes most of the per-step Python and launch overhead at the
first and nearly all of it at the second (Keras, `Model.compile`: "can greatly improve
performance on small models with a large Python overhead")."""

MIN_LOADER_WORKERS = 4
"""Worker counts go up to the CPU count, but to at least 4: a loader's workers mostly wait on
storage, not on a core (PyTorch's DataLoader docs; the bundled example reads with 4 on 2 cores)."""


@dataclass(frozen=True)
class Seen:
    """What the baseline run's hooks saw (the `try_seen` event)."""

    counts: Mapping[str, int] = field(default_factory=dict)
    sites: Mapping[str, str] = field(default_factory=dict)  # what -> file:line in the job
    values: Mapping[str, Any] = field(default_factory=dict)  # the job's own settings

    @classmethod
    def from_event(cls, data: Mapping[str, Any] | None) -> Seen:
        data = data or {}
        return cls(
            counts=dict(data.get("seen") or {}),
            sites=dict(data.get("sites") or {}),
            values=dict(data.get("values") or {}),
        )

    def saw(self, what: str) -> bool:
        return self.counts.get(what, 0) > 0


@dataclass(frozen=True)
class Fix:
    """One candidate: the settings applied together, and the code change they stand for."""

    settings: Mapping[str, Any]
    addresses: str | None = None  # the finding code it answers; None when named by hand

    @property
    def name(self) -> str:
        return ", ".join(_setting_text(k, v) for k, v in sorted(self.settings.items()))

    def changes(self, seen: Seen) -> list[str]:
        """The code change, one line per call it touches, with where the call is."""
        lines = []
        for site_key, text in _change_texts(self.settings, seen):
            site = seen.sites.get(site_key) if site_key else None
            lines.append(f"{site}: {text}" if site else text)
        return lines

    def opt_in(self) -> list[str]:
        return sorted({flag for k in self.settings if (flag := SETTINGS[k][2]) is not None})


def _setting_text(key: str, value: Any) -> str:
    return f"{key}={value}" if not isinstance(value, bool) or value is False else key


def _change_texts(settings: Mapping[str, Any], seen: Seen) -> list[tuple[str | None, str]]:
    """(the call's site key, its change) for each call the settings touch."""
    texts: list[tuple[str | None, str]] = []
    loader = [
        f"{key.split('.', 1)[1]}={value!r}"
        for key, value in sorted(settings.items())
        if key.startswith("torch.")
    ]
    scale = settings.get("batch.scale")
    size = seen.values.get("batch.size")
    bigger = f"{int(size) * int(scale)}" if scale and size else f"{scale} × the batch size"
    if scale and seen.saw("torch.DataLoader"):
        loader.append(f"batch_size={bigger}")
    if loader:
        texts.append(("torch.DataLoader", f"DataLoader(..., {', '.join(loader)})"))
    map_args = []
    if settings.get("tf.parallel_map"):
        map_args.append("num_parallel_calls=tf.data.AUTOTUNE")
    if settings.get("tf.deterministic") is False:
        map_args.append("deterministic=False")
    if map_args:
        texts.append(("tf.map_sequential", f"dataset.map(fn, {', '.join(map_args)})"))
    if settings.get("tf.prefetch"):
        texts.append(
            (
                "tf.no_prefetch",
                "dataset = dataset.prefetch(tf.data.AUTOTUNE)  # last in the pipeline",
            )
        )
    if scale and seen.saw("tf.batch"):
        texts.append(("tf.batch", f"dataset.batch({bigger})"))
    if scale and seen.saw("keras.fit_arrays"):
        texts.append(("keras.fit_arrays", f"model.fit(..., batch_size={bigger})"))
    if scale:
        texts.append((None, f"(a {scale}× larger batch: scale the learning rate with it)"))
    if "keras.steps_per_execution" in settings:
        spe = settings["keras.steps_per_execution"]
        texts.append(("keras.compile", f"model.compile(..., steps_per_execution={spe})"))
    if settings.get("keras.mixed_precision"):
        texts.append(
            (
                None,
                'keras.mixed_precision.set_global_policy("mixed_float16")  # before the model',
            )
        )
    return texts


def parse_fix(text: str, allowed: Sequence[str]) -> Fix:
    """`--fix torch.num_workers=4,torch.pin_memory`: one fix of the named settings."""
    settings: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, _, raw = part.partition("=")
        key = key.strip()
        if key not in SETTINGS:
            raise UsageError(
                f"try: --fix {part}: unknown setting",
                f"choose from {', '.join(SETTINGS)} (docs/try.md)",
            )
        kind, default, flag = SETTINGS[key]
        if flag is not None and flag not in allowed:
            raise UsageError(
                f"try: --fix {part} may change the training's results",
                f"add {flag} to allow it",
            )
        settings[key] = default if not raw else _value(kind, raw.strip(), part)
    if not settings:
        raise UsageError("try: --fix given no setting", "e.g. --fix torch.num_workers=4")
    return Fix(settings)


def _value(kind: type, raw: str, part: str) -> Any:
    if kind is bool:
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
    else:
        try:
            value = int(raw)
        except ValueError:
            pass
        else:
            if value >= 1:
                return value
    raise UsageError(f"try: --fix {part}: bad value", "a whole number ≥ 1, or true/false")


def candidates(
    findings: Sequence[Finding],
    seen: Seen,
    *,
    cuda: bool,
    allowed: Sequence[str] = (),
    cpu_count: int | None = None,
) -> list[Fix]:
    """The fixes worth trying on this job, most direct first; empty when none applies."""
    codes = {finding.code for finding in findings}
    fixes: list[Fix] = []
    if codes & INPUT_CODES:
        fixes += _loader_fixes(seen, cuda=cuda, cpu_count=cpu_count or usable_cores() or 1)
        fixes += _tfdata_fixes(seen, allowed)
    if codes & HOST_CODES and "--allow-batch-size" in allowed and _batch_adjustable(seen):
        fixes.append(Fix({"batch.scale": 2}, next(iter(sorted(codes & HOST_CODES)))))
    gpu_bound = "GPU_BOUND" in codes and cuda and seen.saw("keras.compile")
    if gpu_bound and "--allow-precision" in allowed:
        fixes.append(Fix({"keras.mixed_precision": True}, "GPU_BOUND"))
    if codes & HOST_CODES and seen.saw("keras.compile"):
        current = int(seen.values.get("keras.steps_per_execution") or 1)
        code = next(iter(sorted(codes & HOST_CODES)))
        fixes += [
            Fix({"keras.steps_per_execution": value}, code)
            for value in STEPS_PER_EXECUTION
            if value > current
        ]
    return fixes


def _batch_adjustable(seen: Seen) -> bool:
    return any(seen.saw(what) for what in ("torch.DataLoader", "tf.batch", "keras.fit_arrays"))


def _loader_fixes(seen: Seen, *, cuda: bool, cpu_count: int) -> list[Fix]:
    loaders = seen.counts.get("torch.DataLoader", 0)
    if loaders <= seen.counts.get("torch.IterableDataset", 0):
        return []  # none, or only loaders whose workers would repeat the data
    current = int(seen.values.get("torch.num_workers") or 0)
    ceiling = max(cpu_count, MIN_LOADER_WORKERS)
    tried = (2, MIN_LOADER_WORKERS, min(cpu_count, 8))
    values = sorted({value for value in tried if current < value <= ceiling})
    fixes = [Fix({"torch.num_workers": value}, "INPUT_BOUND") for value in values]
    if cuda and not seen.values.get("torch.pin_memory"):
        fixes.append(Fix({"torch.pin_memory": True}, "INPUT_BOUND"))
    return fixes


def _tfdata_fixes(seen: Seen, allowed: Sequence[str]) -> list[Fix]:
    fixes = []
    if seen.saw("tf.map_sequential"):
        fixes.append(Fix({"tf.parallel_map": True}, "INPUT_BOUND"))
        if "--allow-reorder" in allowed:
            fixes.append(Fix({"tf.parallel_map": True, "tf.deterministic": False}, "INPUT_BOUND"))
    if seen.saw("tf.no_prefetch"):
        fixes.append(Fix({"tf.prefetch": True}, "INPUT_BOUND"))
    return fixes


def combine(winners: Sequence[Fix]) -> Fix | None:
    """The fixes that each measured a gain, together (best first: a setting named by two keeps
    the better one's value); loaders with workers keep them between epochs. None when the
    combination is one of them."""
    if not winners:
        return None
    settings: dict[str, Any] = {}
    for fix in winners:
        for key, value in fix.settings.items():
            settings.setdefault(key, value)
    if int(settings.get("torch.num_workers") or 0) > 0:
        settings.setdefault("torch.persistent_workers", True)
    combined = Fix(settings, winners[0].addresses)
    if any(dict(fix.settings) == settings for fix in winners):
        return None
    return combined
