"""TF_MEMORY_GROWTH (info): how TensorFlow will take GPU memory.

By default TensorFlow "maps nearly all of the GPU memory of all GPUs … visible to the process";
memory growth allocates as needed; TF_FORCE_GPU_ALLOW_GROWTH=true enables it (TF GPU guide,
references.md#tf-devices-memory). TensorFlow accepts exactly "true" or "false" and logs an error and
ignores any other value (tensorflow/core/common_runtime/gpu/gpu_bfc_allocator.cc,
GetAllowGrowthValue). Keras 3 sets the variable to "true" itself when its backend is not tensorflow
(references.md#tf-devices-memory). Only said when TensorFlow can actually use a GPU here.
"""

from __future__ import annotations

from gpuwhy.env import codes
from gpuwhy.env.rules.builds import cpu_only
from gpuwhy.env.rules.view import View
from gpuwhy.model import Finding, Severity

VARIABLE = "TF_FORCE_GPU_ALLOW_GROWTH"


def _tensorflow_on_gpu(view: View) -> bool:
    probe = view.imported("tensorflow")
    if probe is not None:  # TensorFlow said which GPUs it finds
        return bool(probe.get("gpus"))
    gpu_build = cpu_only(view, "tensorflow") is False
    return view.driver_state == "ok" and gpu_build and not view.is_windows


def tf_memory_growth(view: View) -> list[Finding]:
    """One info about TensorFlow's GPU memory allocation when TensorFlow has a GPU."""
    if not _tensorflow_on_gpu(view):
        return []
    value = view.env(VARIABLE)
    backend = view.env("KERAS_BACKEND")
    if value is None and backend and backend != "tensorflow":
        return []  # Keras sets TF_FORCE_GPU_ALLOW_GROWTH=true itself for other backends
    evidence = {VARIABLE: value, "KERAS_BACKEND": backend, "framework": "tensorflow"}
    if value == "true":
        title = f"TensorFlow memory growth is on ({VARIABLE}=true): GPU memory is taken as needed"
        fix = f"Nothing to do; unset {VARIABLE} to let TensorFlow reserve the memory up front."
    elif value == "false":
        title = f"{VARIABLE}=false: TensorFlow reserves nearly all GPU memory at start"
        fix = f"To share the GPU, export {VARIABLE}=true (or unset it and call set_memory_growth)."
    elif value is None:
        title = "TensorFlow will reserve nearly all GPU memory at start (memory growth is off)"
        fix = (
            f"To share the GPU or see the memory the model really uses: export {VARIABLE}=true, or"
            " call tf.config.experimental.set_memory_growth(gpu, True) for each GPU before"
            " TensorFlow initialises."
        )
    else:
        title = f'{VARIABLE}="{value}" is ignored: TensorFlow accepts only "true" or "false"'
        fix = f"export {VARIABLE}=true"
    return [Finding(codes.TF_MEMORY_GROWTH, Severity.INFO, title, evidence, fix)]
