"""`torch.compile` recompilations, timed: a compiled function compiled again amid training.

TorchDynamo compiles a function's frame on its first call and guards the result on what it
assumed (input shapes, dtypes, Python values it specialised on); a call that breaks a guard
compiles the frame again, up to a limit after which the frame runs uncompiled
(references.md#torch-compile-recompilation). A frame's first compile falls on a loop's first
step: warm-up (analysis/steady.py). A later one is one-time work that a change removes (fixed
or dynamic shapes, tensors for changing numbers), as a `tf.function`'s retrace is
(hooks/tf_traces.py).

TorchDynamo calls back at the start and the end of every compile
(`torch._dynamo.callback.callback_handler`), naming it with a compile id, "frame/attempt": an
attempt above 0 recompiles its frame. `install()` registers both callbacks once that module is
loaded (never importing it itself): a recompile becomes an Event ("retrace": its start,
`duration_ns`, `function`: the frame, `pid`). Cost: nothing on a call that finds its compiled
code; a clock read and a regular-expression match per compile, which takes milliseconds or
more.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from types import ModuleType
from typing import Any

from gpuwhy.hooks import emitter, patching

# "frame/compile" (and "_restart"); compiled autograd's ids ("!...") are not a frame's compile
_COMPILE_ID = re.compile(r"(\d+)/(\d+)")
_thread = threading.local()  # .started: the start of the compile under way on this thread


def _started(args: Any) -> None:
    _thread.started = time.monotonic_ns()


def _ended(args: Any) -> None:
    try:
        start_ns, _thread.started = getattr(_thread, "started", None), None
        trigger = getattr(getattr(args, "callback_trigger", None), "name", "")
        if start_ns is None or trigger != "DYNAMO":
            return
        found = _COMPILE_ID.match(str(getattr(args, "compile_id", "")))
        if found is None or found.group(2) == "0":
            return  # a frame's first compile: warm-up
        duration_ns, frame = time.monotonic_ns() - start_ns, f"frame {found.group(1)}"
        emitter.retrace(start_ns, duration_ns, frame, "torch.compile compiled a frame again")
    except Exception:  # never into TorchDynamo's compile
        return


def install(module: ModuleType) -> None:
    """Time TorchDynamo's recompiles from now on (undone with every other patch)."""
    handler = getattr(module, "callback_handler", None)
    names = ("register_start_callback", "register_end_callback")
    if handler is None or not all(callable(getattr(handler, name, None)) for name in names):
        emitter.report_once("torch.compiles", "torch.compile recompiles not timed: layout changed")
        return
    if _started in getattr(handler, "start_callbacks", ()):
        return
    handler.register_start_callback(_started)
    handler.register_end_callback(_ended)
    patching.on_undo(lambda: _stop(handler))


def _stop(handler: Any) -> None:
    with contextlib.suppress(Exception):  # already gone
        handler.remove_start_callback(_started)
    with contextlib.suppress(Exception):
        handler.remove_end_callback(_ended)
