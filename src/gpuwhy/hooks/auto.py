"""Auto-instrumentation: patch each framework right after (and only if) the job imports it.

A `sys.meta_path` finder watches a handful of module names. It imports nothing itself: when the
job imports one of them, the finder lets the normal finders locate it and, once the module's
own code has run, applies gpuwhy's patches (`keras_patches`, `framework_hooks` — Accelerate's
DataLoaders too —, `lightning_hooks`, `transformers_hooks`). Frameworks imported before
`install()` are patched at once. Every patch is applied once and undone by `uninstall()`; a
patch that fails is reported once as an `Event` and the job goes on unpatched.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from gpuwhy.hooks import core_waits, emitter, gc_pauses, patching
from gpuwhy.wire import ENV_BOOT, ENV_TRY

# Each framework's hooks are imported when the job imports that framework, not at start-up: a
# PyTorch job loads no Keras, TensorFlow or JAX hooks (what gpuwhy adds to a job's start-up is
# bench/boot_cost.py's to measure).

ENV_HOOKS = "GPUWHY_HOOKS"
"""Comma-separated frameworks to hook (default: all of `FRAMEWORKS`)."""

FRAMEWORKS: dict[str, tuple[str, ...]] = {
    "keras": ("keras", "tf_keras"),
    "tensorflow": ("tensorflow",),
    # torch.compile's callbacks, once the job's first compile loads them (torch_compiles.py)
    "torch": ("torch", "torch._dynamo.callback"),
    "lightning": ("lightning.pytorch", "pytorch_lightning"),
    "transformers": ("transformers.trainer",),
    "accelerate": ("accelerate.data_loader",),
    # JAX loops are seen through their input, else through their compiled train step
    # (jax_steps.py); the host reads of arrays are wrapped to count syncs.
    "jax": ("jax",),
}


def _patch_module(name: str, module: ModuleType) -> None:
    if name in ("keras", "tf_keras"):
        from gpuwhy.hooks import keras_patches

        keras_patches.install(module)
    elif name == "tensorflow":
        from gpuwhy.hooks import backend_window, framework_hooks

        framework_hooks.install_tensorflow()
        backend_window.follow_plain_loops("tensorflow")
    elif name == "torch":
        from gpuwhy.hooks import framework_hooks, generator_pulls

        framework_hooks.install_torch()
        generator_pulls.install()  # optimizer steps bound a plain loop's steps
    elif name == "torch._dynamo.callback":
        from gpuwhy.hooks import torch_compiles

        torch_compiles.install(module)
    elif name == "transformers.trainer":
        from gpuwhy.hooks import transformers_hooks

        transformers_hooks.install(module)
    elif name == "accelerate.data_loader":
        from gpuwhy.hooks import framework_hooks

        framework_hooks.install_accelerate(module)
    elif name in FRAMEWORKS["lightning"]:
        from gpuwhy.hooks import lightning_hooks

        lightning_hooks.install(module)
    elif name == "jax":
        from gpuwhy.hooks import (
            backend_window,
            generator_pulls,
            jax_compiles,
            jax_steps,
            sync_counting,
        )

        sync_counting.install_jax()
        jax_steps.install()
        jax_compiles.install()
        generator_pulls.install()  # compiled train steps bound a plain loop's steps
        backend_window.follow_plain_loops("jax")


class PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself; marks watched modules so they are patched once they are loaded."""

    def __init__(self, watched: Sequence[str]) -> None:
        self.watched = frozenset(watched)
        self._busy: set[str] = set()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.watched or fullname in self._busy:
            return None  # the common case: one set lookup per import
        self._busy.add(fullname)
        try:
            spec = _find_elsewhere(self, fullname, path, target)
        finally:
            self._busy.discard(fullname)
        loader = spec.loader if spec is not None else None
        # Only per-module loader instances: a class-level loader is shared by every module.
        if loader is not None and not isinstance(loader, type) and hasattr(loader, "exec_module"):
            _patch_after_exec(loader, fullname)
        return spec


def _find_elsewhere(
    skip: object, fullname: str, path: Sequence[str] | None, target: ModuleType | None
) -> importlib.machinery.ModuleSpec | None:
    for finder in list(sys.meta_path):
        if finder is skip or isinstance(finder, PostImportFinder):
            continue
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        spec: importlib.machinery.ModuleSpec | None = find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def _patch_after_exec(loader: Any, fullname: str) -> None:
    """Run the patches when `loader` has executed the module (the loader is left as found)."""
    original: Callable[[ModuleType], None] = loader.exec_module

    def exec_module(module: ModuleType) -> None:
        try:
            original(module)
        finally:
            with contextlib.suppress(AttributeError):
                del loader.exec_module
        _apply(fullname, module)

    loader.exec_module = exec_module


def _try_fixes(name: str, module: ModuleType) -> None:
    from gpuwhy.hooks import try_fixes

    if name in ("keras", "tf_keras"):
        try_fixes.install_keras(module)
    elif name == "tensorflow":
        try_fixes.install_tensorflow()
    elif name == "torch":
        try_fixes.install_torch()
    elif name in FRAMEWORKS["lightning"]:
        try_fixes.install_lightning(module)


def _apply(name: str, module: ModuleType) -> None:
    if os.environ.get(ENV_TRY):  # `gpuwhy try`: this run's fixes, beneath gpuwhy's own hooks
        try:
            _try_fixes(name, module)
        except Exception as error:
            emitter.report_once(f"try:{name}", f"{name}: fixes not applied: {error!r}")
    try:
        _patch_module(name, module)
        emitter.report_once(f"hooked:{name}", f"instrumented {name}", kind="hooks", module=name)
    except Exception as error:  # the job goes on without this framework's hooks
        emitter.report_once(f"patch:{name}", f"{name} not instrumented: {error!r}", module=name)


_finder: PostImportFinder | None = None


def selected_modules(environ: Mapping[str, str]) -> list[str]:
    """The module names to watch, from `GPUWHY_HOOKS` (all frameworks when unset)."""
    chosen = environ.get(ENV_HOOKS)
    names = [n.strip() for n in chosen.split(",")] if chosen else list(FRAMEWORKS)
    return [module for name in names for module in FRAMEWORKS.get(name, ())]


def install(environ: Mapping[str, str] = os.environ, *, replacing: object = None) -> None:
    """Instrument the frameworks the job imports from now on, and those it already imported.

    Idempotent. `GPUWHY_BOOT=0` turns it off. `replacing`: a finder in `sys.meta_path` to put
    this one in place of (the start-up hook's, while an import is under way).
    """
    global _finder
    if environ.get(ENV_BOOT) == "0" or _finder is not None:
        return
    modules = selected_modules(environ)
    _finder = PostImportFinder(modules)
    if replacing is not None and replacing in sys.meta_path:
        sys.meta_path[sys.meta_path.index(replacing)] = _finder  # in place: no list shift
    else:
        sys.meta_path.insert(0, _finder)
    gc_pauses.install()
    core_waits.install()
    for name in modules:
        module = sys.modules.get(name)
        if module is not None:
            _apply(name, module)


def finder() -> PostImportFinder | None:
    """The installed finder, if any."""
    return _finder


def is_installed() -> bool:
    """Whether the auto-instrumentation is active in this process."""
    return _finder is not None


def uninstall() -> None:
    """Remove the finder and undo every patch (for tests and `gpuwhy.monitor()` teardown)."""
    global _finder
    if _finder is not None and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    _finder = None
    patching.undo_all()
    gc_pauses.uninstall()
    core_waits.uninstall()
    for name, forget in (
        ("generator_pulls", "uninstall"),
        ("jax_steps", "uninstall"),
        ("input_pipelines", "forget"),
    ):
        loaded = sys.modules.get(f"gpuwhy.hooks.{name}")  # not imported: nothing to undo
        if loaded is not None:
            getattr(loaded, forget)()
