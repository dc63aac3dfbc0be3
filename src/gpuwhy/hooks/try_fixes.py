"""`gpuwhy try`, inside the job: apply one set of candidate fixes, stop after a step budget.

`gpuwhy try` starts the job several times, each with `GPUWHY_TRY` naming the fixes of that
run (`wire.ENV_TRY`: JSON). Here they are applied in-process, where the job builds its input and
model, so its code and files are never edited:

- PyTorch `DataLoader(...)`: `num_workers`, `pin_memory`, `persistent_workers`,
  `prefetch_factor` override the job's arguments (never for an `IterableDataset`: each worker
  would yield every item unless the dataset shards by worker itself);
- `tf.data`: `map` without `num_parallel_calls` gets `AUTOTUNE` (and `deterministic=False`
  where asked), a dataset iterated or given to Keras `fit` gets `prefetch(AUTOTUNE)` at the end;
- Keras `compile`: `steps_per_execution`;
- opt-in, as they change the optimisation: the batch size scaled (`DataLoader(batch_size=…)`,
  tf.data `batch(…)`, Keras `fit(batch_size=…)` on arrays) and Keras' `mixed_float16` policy.

What the job does is observed in every run (loaders made, sequential maps, where each was
made), so the baseline run tells `gpuwhy try` which fixes can apply and where the code change
goes. Saving a model or checkpoint to a path (torch.save, Keras save, tf.train.Checkpoint,
Lightning) is skipped and counted: a shortened run must not leave a checkpoint where the full
run keeps its own. After the budget of steps of the measured phase, the job is stopped at a step
boundary: its records are delivered, its worker processes terminated, and it exits at once
(`os._exit`), so no end-of-training code (a final save, an export) runs.
"""

from __future__ import annotations

import functools
import inspect
import json
import multiprocessing
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from gpuwhy.hooks import emitter, patching, tracker
from gpuwhy.model import Event
from gpuwhy.wire import ENV_TRY, TRY_SEEN_EVENT, TRY_STOPPED_EVENT

_GPUWHY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Trial:
    """This process's settings, step budget and what it saw."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.fixes: dict[str, Any] = dict(settings.get("fixes") or {})
        self.phase: str | None = settings.get("phase")
        self.skip = int(settings.get("skip", 0))
        self.steps = int(settings.get("steps", 0))  # 0: no budget, the job runs to its end
        self.time_s = settings.get("time_s")
        self.counted: dict[str, int] = {}  # steps per phase
        self.measured_from_ns: dict[str, int] = {}  # per phase: the end of its warm-up
        self.seen: dict[str, int] = {}
        self.sites: dict[str, str] = {}
        self.applied: dict[str, int] = {}
        self.values: dict[str, Any] = {}
        self.reported = False
        self.pid = os.getpid()

    def note(self, what: str, *, site: bool = False) -> None:
        self.seen[what] = self.seen.get(what, 0) + 1
        if site and what not in self.sites:
            where = _call_site()
            if where is not None:
                self.sites[what] = where

    def apply(self, fix: str) -> None:
        self.applied[fix] = self.applied.get(fix, 0) + 1

    def batch_size(self, size: Any) -> Any:
        """The batch size to use for the job's own `size`: scaled where the trial asks (the
        first size seen is what the code change names)."""
        self.values.setdefault("batch.size", size)
        scale = self.fixes.get("batch.scale")
        if not scale or not isinstance(size, int):
            return size
        self.apply("batch.scale")
        return size * int(scale)

    def on_step(self, phase: str, steps: int, t: int) -> None:
        """A step of `phase` closed at `t` (tracker.close_step): stop once the budget is spent.

        Without a phase named, every phase counts its own steps and the first to spend the
        budget is the one measured (a short warm-up loop or a validation pass does not).
        """
        if os.getpid() != self.pid or not self.steps:
            return  # a forked worker: only the job's own process counts steps
        if self.phase is not None and phase != self.phase:
            return
        counted = self.counted[phase] = self.counted.get(phase, 0) + steps
        if phase not in self.measured_from_ns and counted >= self.skip:
            self.measured_from_ns[phase] = t
        done = counted >= self.skip + self.steps
        started = self.measured_from_ns.get(phase)
        if not done and self.time_s is not None and started is not None:
            done = (t - started) / 1e9 >= float(self.time_s)
        if done:
            self.phase = phase
            self.stop(t)

    def report(self) -> None:
        if self.reported or os.getpid() != self.pid:
            return
        self.reported = True
        data = {
            "seen": self.seen,
            "sites": self.sites,
            "applied": self.applied,
            "values": self.values,
            "phase": self.phase or _most_steps(self.counted),
            "steps": self.counted,
        }
        emitter.emit(Event(tracker.clock(), TRY_SEEN_EVENT, "what the trial saw", data))

    def stop(self, t: int) -> None:
        """End the job now, at this step boundary, whatever fails on the way out."""
        try:
            tracker.unwind(0, t)  # this thread's phases end with the last step
            self.report()
            steps = self.counted.get(self.phase or "", 0)
            message = f"stopped after {steps} steps of {self.phase}"
            emitter.emit(Event(t, TRY_STOPPED_EVENT, message, {"steps": steps}))
            for process in multiprocessing.active_children():  # data loader workers
                process.terminate()
            emitter.finish()  # delivers every record, closes the socket
            for stream in (sys.stdout, sys.stderr):
                stream.flush()  # the job's output, for the log `gpuwhy try` keeps
        finally:
            os._exit(0)


def _most_steps(counted: Mapping[str, int]) -> str | None:
    """A job that ended before its budget: the phase that ran the most steps is measured."""
    return max(counted, key=lambda phase: counted[phase], default=None)


_trial: _Trial | None = None


def from_environment(environ: Mapping[str, str] = os.environ) -> _Trial | None:
    """The trial `gpuwhy try` asked for, set up once per process; None outside a trial."""
    global _trial
    if _trial is not None:
        return _trial
    value = environ.get(ENV_TRY)
    if not value:
        return None
    try:
        settings = json.loads(value)
        trial = _Trial(settings)
    except (ValueError, TypeError, AttributeError) as error:
        emitter.report_once("try", f"{ENV_TRY} not understood ({error!r}): no trial")
        return None
    _trial = trial
    tracker.on_step_closed.append(trial.on_step)
    emitter.on_exit(trial.report)
    return trial


def _call_site() -> str | None:
    """`file:line` of the job's own code that made the call (the first frame outside any
    installed package and gpuwhy): where the code change goes."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        outside = "site-packages" not in name and "dist-packages" not in name
        if outside and not name.startswith(_GPUWHY_DIR) and not name.startswith("<"):
            relative = os.path.relpath(name)
            shown = name if relative.startswith("..") else relative
            return f"{shown}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return None


# ---------------------------------------------------------------------------------- torch

_TORCH_LOADER_FIXES = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")


def install_torch() -> None:
    trial = from_environment()
    if trial is None:
        return
    torch = sys.modules["torch"]
    loader_class = torch.utils.data.DataLoader
    iterable = torch.utils.data.IterableDataset
    signature = inspect.signature(loader_class.__init__)

    def make(original: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(original)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            try:
                bound = signature.bind(self, *args, **kwargs)
                _fix_loader(trial, bound.arguments, iterable)
                args, kwargs = (), {k: v for k, v in bound.arguments.items() if k != "self"}
            except Exception as error:  # arguments torch will reject itself: left as given
                emitter.report_once("try.loader", f"DataLoader left as written: {error!r}")
            original(self, *args, **kwargs)

        return __init__

    patching.patch(loader_class, "__init__", make)
    _guard_saves(torch, ("save",), path_arg=1)
    jit = getattr(torch, "jit", None)
    if jit is not None:
        _guard_saves(jit, ("save",), path_arg=1)


def _fix_loader(trial: _Trial, arguments: dict[str, Any], iterable: type) -> None:
    trial.note("torch.DataLoader", site=True)
    workers = int(arguments.get("num_workers", 0) or 0)
    trial.values.setdefault("torch.num_workers", workers)
    trial.values.setdefault("torch.pin_memory", bool(arguments.get("pin_memory", False)))
    if isinstance(arguments.get("dataset"), iterable):
        trial.note("torch.IterableDataset")
        return  # workers would each yield the whole dataset
    for name in _TORCH_LOADER_FIXES:
        fix = f"torch.{name}"
        if fix in trial.fixes:
            arguments[name] = trial.fixes[fix]
            trial.apply(fix)
    size = arguments.get("batch_size", 1)
    if arguments.get("batch_sampler") is None:
        arguments["batch_size"] = trial.batch_size(size)
    else:  # a sampler makes its own batches: nothing to scale
        trial.values.setdefault("batch.size", size)
    if int(arguments.get("num_workers", 0) or 0) == 0:
        # torch refuses these without workers: a fix that adds them needs workers as well
        arguments.pop("persistent_workers", None)
        arguments.pop("prefetch_factor", None)


# ---------------------------------------------------------------------------------- tf.data


def install_tensorflow() -> None:
    trial = from_environment()
    if trial is None:
        return
    dataset_ops = sys.modules.get("tensorflow.python.data.ops.dataset_ops")
    if dataset_ops is None:
        emitter.report_once("try.tf", "tf.data not reachable: its fixes cannot apply")
        return
    dataset_class = dataset_ops.DatasetV2
    autotune = dataset_ops.AUTOTUNE
    map_signature = inspect.signature(dataset_class.map)

    def make_map(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def map(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                bound = map_signature.bind(self, *args, **kwargs)
            except TypeError:
                return original(self, *args, **kwargs)
            function = bound.arguments.get("map_func")
            if str(getattr(function, "__module__", "")).startswith("gpuwhy"):
                return original(self, *args, **kwargs)  # gpuwhy's own stamps stay inline
            if bound.arguments.get("num_parallel_calls") is None:
                trial.note("tf.map_sequential", site=True)
                if trial.fixes.get("tf.parallel_map"):
                    bound.arguments["num_parallel_calls"] = autotune
                    trial.apply("tf.parallel_map")
            if trial.fixes.get("tf.deterministic") is False:
                bound.arguments["deterministic"] = False
                trial.apply("tf.deterministic")
            return original(*bound.args, **bound.kwargs)

        return map

    def make_iter(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
        @functools.wraps(original)
        def __iter__(self: Any) -> Any:
            return original(_prefetched(trial, self, autotune))

        return __iter__

    def make_batch(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def batch(self: Any, batch_size: Any, *args: Any, **kwargs: Any) -> Any:
            trial.note("tf.batch", site=True)
            return original(self, trial.batch_size(batch_size), *args, **kwargs)

        return batch

    patching.patch(dataset_class, "batch", make_batch)
    patching.patch(dataset_class, "map", make_map)
    patching.patch(dataset_class, "__iter__", make_iter)
    tf = sys.modules.get("tensorflow")
    train = getattr(tf, "train", None)
    if train is not None:
        _guard_saves(getattr(train, "Checkpoint", None), ("save", "write"), path_arg=1)
        _guard_saves(getattr(train, "CheckpointManager", None), ("save",), path_arg=None)
    _guard_saves(getattr(tf, "saved_model", None), ("save",), path_arg=1)


def _prefetched(trial: _Trial, dataset: Any, autotune: int) -> Any:
    """`dataset` ending in `prefetch(AUTOTUNE)` where the trial asks for it."""
    if "Prefetch" in type(dataset).__name__:
        return dataset
    trial.note("tf.no_prefetch", site=True)
    try:
        if _would_inject_prefetch(dataset):
            trial.note("tf.prefetch_injected")  # tf.data appends one itself
    except Exception:  # an options layout it does not know: nothing said
        pass
    if not trial.fixes.get("tf.prefetch"):
        return dataset
    trial.apply("tf.prefetch")
    return dataset.prefetch(autotune)


_PASS_THROUGH = (
    "_OptionsDataset",
    "_AssertNextDataset",
    "_MaxIntraOpParallelismDataset",
    "_PrivateThreadPoolDataset",
    "_ModelDataset",
    "_OptimizeDataset",
)
# tf.data's inject_prefetch looks through these before deciding (inject_prefetch.cc).


def _would_inject_prefetch(dataset: Any) -> bool:
    """Whether tf.data itself would append `prefetch(AUTOTUNE)` to `dataset`."""
    options = dataset.options()
    if (
        options.autotune.enabled is False
        or options.experimental_optimization.inject_prefetch is False
    ):
        return False
    node = dataset
    while type(node).__name__ in _PASS_THROUGH:
        inputs = node._inputs()
        if len(inputs) != 1:
            break
        node = inputs[0]
    return "Prefetch" not in type(node).__name__


# ---------------------------------------------------------------------------------- keras


def install_keras(keras: Any) -> None:
    trial = from_environment()
    if trial is None or keras.__name__ != "keras":
        return
    model = keras.Model
    steps_per_execution = trial.fixes.get("keras.steps_per_execution")
    if trial.fixes.get("keras.mixed_precision"):
        # Before any layer is built: the job's model is made under the policy.
        keras.mixed_precision.set_global_policy("mixed_float16")
        trial.apply("keras.mixed_precision")

    def make_compile(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def compile(self: Any, *args: Any, **kwargs: Any) -> Any:
            trial.note("keras.compile", site=True)
            trial.values.setdefault(
                "keras.steps_per_execution", kwargs.get("steps_per_execution", 1)
            )
            if steps_per_execution is not None:
                kwargs["steps_per_execution"] = int(steps_per_execution)
                trial.apply("keras.steps_per_execution")
            return original(self, *args, **kwargs)

        return compile

    patching.patch(model, "compile", make_compile)
    # On the class that defines fit, before keras_patches wraps Model.fit (auto.py patches
    # the trial first): gpuwhy's callback then wraps this, and the dataset gets its prefetch
    # before gpuwhy's timing stages are added to it.
    defining = next((k for k in model.__mro__[1:] if "fit" in vars(k)), None)
    if defining is not None:
        patching.patch(defining, "fit", _fit_with_prefetch(trial))
    _guard_saves(model, ("save", "save_weights", "export"), path_arg=1)


def _fit_with_prefetch(trial: _Trial) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        @functools.wraps(original)
        def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                bound = signature.bind(self, *args, **kwargs)
            except TypeError:  # Keras will say what is wrong
                return original(self, *args, **kwargs)
            x = bound.arguments.get("x")
            tf = sys.modules.get("tensorflow")
            dataset_type = getattr(getattr(tf, "data", None), "Dataset", None)
            if dataset_type is not None and isinstance(x, dataset_type):
                bound.arguments["x"] = _prefetched(trial, x, tf.data.AUTOTUNE)  # type: ignore[union-attr]
            elif hasattr(x, "shape"):  # arrays: Keras batches them itself
                trial.note("keras.fit_arrays", site=True)
                size = int(bound.arguments.get("batch_size") or 32)  # Keras' default: 32
                bound.arguments["batch_size"] = trial.batch_size(size)
            return original(*bound.args, **bound.kwargs)

        return fit

    return make


def install_lightning(module: Any) -> None:
    if from_environment() is None:
        return
    _guard_saves(getattr(module, "Trainer", None), ("save_checkpoint",), path_arg=None)


# ---------------------------------------------------------------------------------- saves


def _guard_saves(owner: Any, names: tuple[str, ...], *, path_arg: int | None) -> None:
    """Skip (and count) each `owner.name(...)` that writes to a path.

    `path_arg`: the position of the destination among the arguments (a file-like destination,
    an in-memory buffer say, is written as usual); None: every call writes to disk.
    """
    if owner is None:
        return
    for name in names:
        if getattr(owner, name, None) is None:
            continue

        def make(original: Callable[..., Any], label: str = f"{name}") -> Callable[..., Any]:
            @functools.wraps(original)
            def skipped(*args: Any, **kwargs: Any) -> Any:
                if path_arg is not None:
                    target = args[path_arg] if len(args) > path_arg else _destination(kwargs)
                    if not isinstance(target, (str, os.PathLike)):
                        return original(*args, **kwargs)
                if _trial is not None:
                    _trial.note("saves_skipped")
                emitter.report_once(f"try.save.{label}", f"{label}: skipped during the trial")
                return None

            return skipped

        patching.patch(owner, name, make)


def _destination(kwargs: Mapping[str, Any]) -> Any:
    for name in ("f", "filepath", "file_prefix", "export_dir"):
        if name in kwargs:
            return kwargs[name]
    return None
