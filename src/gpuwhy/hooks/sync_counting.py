"""Counting the job's device-to-host synchronisations, per step, without causing any.

Reading a device value on the host (`loss.item()`, `float(loss)`, `.tolist()`, `.cpu()`,
`print(tensor)`, `torch.cuda.synchronize()`; on TensorFlow `.numpy()`, `float()` of a GPU
tensor; on JAX `float(x)`, `np.asarray(x)`, `jax.device_get(x)`, `x.block_until_ready()`) makes
the host wait until the device has run everything queued before it, so host and device take
turns instead of overlapping (references.md#torch-sync-points).

Each wrapper calls the original first and returns its result or exception untouched; only when
the call returned and the value lives off the CPU does it add one to the thread's open step
(`tracker.count_sync`): an attribute read and an increment, no device query of its own. A
value on the CPU waited for nothing and is never counted, so on a CPU-only run these wrappers
cost one extra Python call per read and count nothing.

Not seen: syncs inside the framework's C++ (boolean-mask indexing, `nonzero()`, collectives),
and reads on other threads than the one running the phase (Keras's asynchronous log fetching).
`torch.cuda.set_sync_debug_mode("warn")` would see more, but it is a process-global switch the
job may use itself, and it reports each sync as a formatted Python warning (the per-location
warning filter would also hide repeats): neither O(1) nor ours to take.

The same `.to()` (and `.cuda()`) wrappers time the opposite copies, host to device, from pageable
(not pinned) memory: the host blocks in them while the driver stages the data, and they cannot
overlap compute (PAGEABLE_COPY, analysis/rules/pageable.py). A clock read around the call, and
for a copy that left the CPU one `is_pinned()` query (~2 µs); a pinned copy is not recorded.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from gpuwhy.hooks import emitter, patching, tracker

TORCH_HOST_READS = ("item", "tolist", "__bool__", "__float__", "__int__", "__index__")
"""`torch.Tensor` methods without arguments that copy a value to the host (blocking) when it
lives on a device; `cpu()` and `to()` too. `__format__` (f"{loss:.3f}") goes through `item`,
`print` through `to("cpu")`: each counted once."""


def _count() -> None:
    try:
        tracker.count_sync()
    except Exception as error:  # never into the user's code
        emitter.report_once("sync", f"sync counting failed: {error!r}")


def _torch_read(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    # Fixed arity and the check inlined: ~0.05 µs per call where `*args` costs ~0.3 µs.
    @functools.wraps(original)
    def read(self: Any) -> Any:
        value = original(self)
        try:
            if not self.is_cpu:
                _count()
        except Exception:  # never into the user's code
            pass
        return value

    return read


def _torch_cpu(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def cpu(self: Any, *args: Any, **kwargs: Any) -> Any:
        value = original(self, *args, **kwargs)
        try:
            if not self.is_cpu:
                _count()
        except Exception:
            pass
        return value

    return cpu


def _copied(source: Any, moved: Any, started: int) -> None:
    """A `.to()`/`.cuda()` of `source` that returned `moved` at once after `started`: a copy
    from pageable host memory to a device is timed (the host blocks in it: the driver stages it
    through a bounce buffer, references.md#cuda-pageable-copies); a pinned one, queued without
    waiting, is not."""
    ended = tracker.clock()
    try:
        if moved is not source and not moved.is_cpu and not source.is_pinned():
            tracker.pageable_copy(started, ended, source.nbytes)
    except Exception as error:  # never into the user's code
        emitter.report_once("copy", f"copy timing failed: {error!r}")


def _torch_cuda(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def cuda(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not self.is_cpu:
            return original(self, *args, **kwargs)
        started = tracker.clock()
        moved = original(self, *args, **kwargs)
        _copied(self, moved, started)
        return moved

    return cuda


def _torch_to(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.is_cpu:  # to a device: a copy the host may block in
            started = tracker.clock()
            moved = original(self, *args, **kwargs)
            _copied(self, moved, started)
            return moved
        moved = original(self, *args, **kwargs)
        try:
            # Only device -> CPU copies wait; a non_blocking one lands in pinned memory.
            if (
                moved is not self
                and moved.is_cpu is True
                and not kwargs.get("non_blocking")
                and not any(a is True for a in args)
            ):
                _count()
        except Exception:
            pass
        return moved

    return to


def _after_call(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def synchronize(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        _count()
        return result

    return synchronize


TORCH_COPIES = (("cpu", _torch_cpu), ("to", _torch_to), ("cuda", _torch_cuda))
"""Wrapped only once a device has started (`_when_a_device_starts`): frameworks call `to()` all
the time (Keras on torch ~50 times a step, moving what is already in place), and each wrapped
call costs a Python frame, for nothing on a machine whose tensors are all on the CPU."""

ACCELERATOR_MODULES = ("torch_xla", "torch_npu", "intel_extension_for_pytorch")
"""Devices whose start has no hook here: where one is loaded, the copies are wrapped at once."""

_installs = 0  # counts installs and undos: a device starting after an undo wraps nothing


def install_torch() -> None:
    """Count host reads of device tensors and `torch.cuda.synchronize()` calls."""
    global _installs
    torch = sys.modules.get("torch")
    tensor = getattr(torch, "Tensor", None)
    if tensor is None or not hasattr(tensor, "is_cpu"):
        emitter.report_once("sync.torch", "torch syncs not counted: module layout changed")
        return
    for name in TORCH_HOST_READS:
        if callable(getattr(tensor, name, None)):
            patching.patch(tensor, name, _torch_read)
    cuda = getattr(torch, "cuda", None)
    if callable(getattr(cuda, "synchronize", None)):
        patching.patch(cuda, "synchronize", _after_call)
    _installs += 1
    patching.on_undo(_undone)
    _when_a_device_starts(torch, functools.partial(_wrap_copies, tensor, _installs))


def _undone() -> None:
    global _installs
    _installs += 1


def _wrap_copies(tensor: Any, install: int) -> None:
    """Wrap `Tensor.cpu` and `.to`, unless the hooks were undone since `install`. Never raises:
    it may run inside torch's own device start."""
    if install != _installs:
        return
    try:
        for name, wrapper in TORCH_COPIES:
            if callable(getattr(tensor, name, None)):
                patching.patch(tensor, name, wrapper)
    except Exception as error:
        emitter.report_once("sync.torch.copies", f"torch copies not counted: {error!r}")


def _when_a_device_starts(torch: Any, install: Callable[[], None]) -> None:
    """`install()` now if this process may already hold tensors off the CPU, else when CUDA
    (or ROCm, which is torch.cuda too) or XPU starts in it: torch runs the calls queued by
    `_lazy_call` as it starts the device, before the first tensor is placed there. Asking
    whether a device exists instead would start CUDA's driver, which a forked DataLoader worker
    could then not use."""
    backends = getattr(torch, "backends", None)
    mps = getattr(backends, "mps", None)
    modules = (getattr(torch, "cuda", None), getattr(torch, "xpu", None))
    lazy: list[Callable[[Callable[[], None]], None]] = [
        call
        for call in (getattr(module, "_lazy_call", None) for module in modules)
        if callable(call)
    ]
    try:
        on_apple_gpu = mps is not None and bool(mps.is_available())
    except Exception:
        on_apple_gpu = True  # cannot tell: wrap now, as before any device starts
    other = any(name in sys.modules for name in ACCELERATOR_MODULES)
    if on_apple_gpu or other or len(lazy) < len(modules):
        install()
        return
    for call in lazy:
        try:
            call(install)  # at once if that device already started
        except Exception:
            install()
            return


def _tf_read(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    @functools.wraps(original)
    def _numpy(self: Any) -> Any:
        value = original(self)
        try:
            on_device = "CPU" not in self.device
        except Exception:  # a tensor without a device name tells nothing
            on_device = False
        if on_device:
            _count()
        return value

    return _numpy


def install_tensorflow() -> None:
    """Count host reads of eager tensors that live on a device: `.numpy()`, `float()`, `int()`,
    `bool()`, `np.asarray()` and printing all go through `_EagerTensorBase._numpy`, once."""
    ops = sys.modules.get("tensorflow.python.framework.ops")
    base = getattr(ops, "_EagerTensorBase", None)
    if base is None or not callable(vars(base).get("_numpy")):
        emitter.report_once("sync.tensorflow", "TensorFlow syncs not counted: layout changed")
        return
    patching.patch(base, "_numpy", _tf_read)


def _jax_on_device(array: Any) -> bool:
    return any(device.platform != "cpu" for device in array.devices())


def _jax_value(original: Any) -> Any:
    """`ArrayImpl._value`, the host copy every read goes through; JAX keeps it once made, so
    only the read that makes it (from a device) waited."""
    fget = original.fget

    def _value(self: Any) -> Any:
        fresh = getattr(self, "_npy_value", None) is None  # never an error of ours
        value = fget(self)
        try:
            if fresh and _jax_on_device(self):
                _count()
        except Exception:  # never into the user's code
            pass
        return value

    return property(functools.wraps(fget)(_value), doc=original.__doc__)


def _jax_wait(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def block_until_ready(self: Any) -> Any:
        result = original(self)
        try:
            if _jax_on_device(self):
                _count()
        except Exception:
            pass
        return result

    return block_until_ready


def install_jax() -> None:
    """Count host reads of JAX arrays that live on a device: `float()`, `int()`, `bool()`,
    `.item()`, `.tolist()`, `np.asarray()`, printing and `jax.device_get` all go through
    `ArrayImpl._value`; and `block_until_ready()` (`jax.block_until_ready` calls it)."""
    module = sys.modules.get("jax._src.array")
    array = getattr(module, "ArrayImpl", None)
    value = vars(array).get("_value") if array is not None else None
    if not isinstance(value, property) or not callable(getattr(array, "block_until_ready", None)):
        emitter.report_once("sync.jax", "JAX syncs not counted: module layout changed")
        return
    patching.patch(array, "_value", _jax_value)
    patching.patch(array, "block_until_ready", _jax_wait)
