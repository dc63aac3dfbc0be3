"""IDLE_GPUS, IDLE_ALLOCATED and GPU_IMBALANCE: on a multi-GPU machine, GPUs the job leaves
unused, holds without using, or uses unevenly.

IDLE_GPUS: the job runs on some GPUs while others stay below 1 % utilization with none of the job's
processes on them (no peer flags this, references.md#peer-gaps; the idle level is NVML's
"no kernel ran", references.md#nvml-utilization). GPU_IMBALANCE: among the GPUs the job uses, the
least busy one is more than 20 % below the busiest (SageMaker Debugger LoadBalancing default
threshold 0.2, references.md#gpuprof-traceml). IDLE_ALLOCATED: a GPU the job's processes hold
memory on (NVML lists them there) that stays below the same 1 % while another of the job's GPUs
works: TensorFlow maps memory on every visible GPU and computes on the first unless told
otherwise (references.md#tf-memory-growth), and a rank that touches CUDA before choosing its
device opens a context on GPU 0. Such a GPU is left out of GPU_IMBALANCE: it is the same cause,
said once.
"""

from __future__ import annotations

from gpuwhy.analysis import whatif
from gpuwhy.analysis.context import IDLE_UTIL_PCT, RunContext
from gpuwhy.analysis.framework import pick
from gpuwhy.analysis.rules.common import MIN_PHASE_S, r, used_stats
from gpuwhy.model import Finding, Severity

IMBALANCE_FRACTION = 0.20  # SageMaker Debugger LoadBalancing threshold
IDLE_REFERENCE = "NVML utilization.gpu < 1 %: no kernel ran; the job's processes absent"
IMBALANCE_REFERENCE = "SageMaker Debugger LoadBalancing rule: 0.2 difference"

IDLE_FIXES = {
    "tensorflow": (
        "Train on every GPU: `strategy = tf.distribute.MirroredStrategy()` and build/compile the "
        "model inside `with strategy.scope():` (scale the global batch size with the GPU count); "
        "or leave them to others with `CUDA_VISIBLE_DEVICES`."
    ),
    "keras-jax": (
        "Train on every GPU: `keras.distribution.set_distribution("
        "keras.distribution.DataParallel())` before building the model."
    ),
    "lightning": "Train on every GPU: `Trainer(accelerator='gpu', devices=-1, strategy='ddp')`.",
    "torch": (
        "Train on every GPU with DistributedDataParallel: `torchrun --nproc_per_node=N train.py`, "
        "`model = DDP(model.to(rank), device_ids=[rank])` and a `DistributedSampler`; "
        "or leave them to others with `CUDA_VISIBLE_DEVICES`."
    ),
    "default": (
        "Use every GPU with data parallelism (MirroredStrategy, DDP), or hide the unused ones with "
        "`CUDA_VISIBLE_DEVICES` so others can use them."
    ),
}

IDLE_ALLOCATED_FIXES = {
    "tensorflow": (
        "TensorFlow maps memory on every GPU it sees and computes on the first: train on all of "
        "them with `tf.distribute.MirroredStrategy()` (model built inside `strategy.scope()`), "
        "or let it see only the ones it uses (`CUDA_VISIBLE_DEVICES=0`, or "
        "`tf.config.set_visible_devices(gpus[:1], 'GPU')` before any op runs)."
    ),
    "torch": (
        "Call `torch.cuda.set_device(local_rank)` first thing in each rank (before any CUDA "
        "call, `torch.load(map_location=...)` included), put the model on that device, and "
        "start one rank per GPU (`torchrun --nproc-per-node=N`); or hide unused GPUs with "
        "`CUDA_VISIBLE_DEVICES`."
    ),
    "default": (
        "Run work on every GPU the job holds (one process per GPU), or let the job see only "
        "the GPUs it computes on (`CUDA_VISIBLE_DEVICES`)."
    ),
}

IMBALANCE_FIXES = {
    "tensorflow": (
        "Split each batch evenly: `tf.distribute.MirroredStrategy` with a global batch size "
        "divisible by the GPU count; keep extra work (metrics, logging) off GPU 0."
    ),
    "torch": (
        "Use DistributedDataParallel (one process per GPU) instead of `nn.DataParallel`, which "
        "gathers outputs and loss on GPU 0; give every rank the same number of samples "
        "(`DistributedSampler(drop_last=True)`)."
    ),
    "default": (
        "Give every GPU the same work per step (even batch split, one process per GPU) and keep "
        "extra work off the first GPU."
    ),
}


def _window(ctx: RunContext) -> tuple[str, float]:
    train = ctx.training_phase()
    if train is not None and train.time_s >= MIN_PHASE_S:
        return train.name, train.time_s
    active = [p for p in ctx.named_phases]
    total = sum(p.time_s for p in active) if active else ctx.duration_s
    return ("_active" if active else "_run"), total


def check_idle(ctx: RunContext) -> list[Finding]:
    active = ctx.active_gpu()
    used = ctx.used_devices()
    if len(active) < 2 or not used:
        return []
    idle = [
        d
        for d, s in active.items()
        if d not in used
        and s.job_seen is not True
        and s.util_mean_pct is not None
        and s.util_mean_pct < IDLE_UTIL_PCT
    ]
    if not idle:
        return []
    window, window_s = _window(ctx)
    total = len(used) + len(idle)
    est = whatif.use_all_gpus(ctx.duration_s, window, window_s, len(used), total)
    return [
        Finding(
            code="IDLE_GPUS",
            severity=Severity.WARNING,
            title=f"The job uses {len(used)} of {total} GPUs; GPU {_names(idle)} stayed idle",
            evidence={
                "used_gpus": used,
                "idle_gpus": idle,
                "idle_gpu_util_pct": {str(d): r(active[d].util_mean_pct, 1) for d in idle},
                "threshold_util_pct": IDLE_UTIL_PCT,
                "reference": IDLE_REFERENCE,
            },
            fix=pick(ctx.framework, IDLE_FIXES),
            speedup=est.speedup,
            speedup_method=est.method,
        )
    ]


def _held_idle(ctx: RunContext) -> tuple[list[int], list[int]]:
    """The GPUs the job's processes hold memory on: the idle ones, and the working ones."""
    idle: list[int] = []
    working: list[int] = []
    for device, stats in ctx.active_gpu().items():
        if stats.job_seen is not True or stats.util_mean_pct is None:
            continue
        (idle if stats.util_mean_pct < IDLE_UTIL_PCT else working).append(device)
    return idle, working


def check_idle_allocated(ctx: RunContext) -> list[Finding]:
    idle, working = _held_idle(ctx)
    if not idle or not working:
        return []
    active = ctx.active_gpu()
    window, window_s = _window(ctx)
    total = len(idle) + len(working)
    est = whatif.use_all_gpus(ctx.duration_s, window, window_s, len(working), total)
    return [
        Finding(
            code="IDLE_ALLOCATED",
            severity=Severity.WARNING,
            title=(
                f"The job holds memory on GPU {_names(idle)} but runs nothing there "
                f"(it computes on GPU {_names(working)})"
            ),
            evidence={
                "idle_gpus": idle,
                "working_gpus": working,
                "idle_gpu_util_pct": {str(d): r(active[d].util_mean_pct, 1) for d in idle},
                "idle_gpu_job_memory_bytes": {str(d): active[d].job_memory_max_bytes for d in idle},
                "threshold_util_pct": IDLE_UTIL_PCT,
                "reference": IDLE_REFERENCE,
            },
            fix=pick(ctx.framework, IDLE_ALLOCATED_FIXES),
            speedup=est.speedup,
            speedup_method=est.method,
        )
    ]


def check_imbalance(ctx: RunContext) -> list[Finding]:
    window, window_s = _window(ctx)
    stats = used_stats(ctx, window)
    held_idle, _ = _held_idle(ctx)
    loads = {
        d: s.util_mean_pct
        for d, s in stats.items()
        if s.util_mean_pct is not None and d not in held_idle
    }
    if len(loads) < 2:
        return []
    busiest, least = max(loads.values()), min(loads.values())
    if busiest <= 0 or (busiest - least) / busiest <= IMBALANCE_FRACTION:
        return []
    mean = sum(loads.values()) / len(loads)
    est = whatif.balance_gpus(ctx.duration_s, window, window_s, mean, busiest)
    return [
        Finding(
            code="GPU_IMBALANCE",
            severity=Severity.WARNING,
            title=f"GPUs used unevenly: {least:.0f} % to {busiest:.0f} % busy",
            evidence={
                "phase": window,
                "gpu_util_pct": {str(d): r(u, 1) for d, u in sorted(loads.items())},
                "spread_fraction": r((busiest - least) / busiest),
                "threshold_fraction": IMBALANCE_FRACTION,
                "reference": IMBALANCE_REFERENCE,
            },
            fix=pick(ctx.framework, IMBALANCE_FIXES),
            speedup=est.speedup,
            speedup_method=est.method,
        )
    ]


def _names(devices: list[int]) -> str:
    return ", ".join(str(d) for d in devices)


def check(ctx: RunContext) -> list[Finding]:
    return check_idle(ctx) + check_idle_allocated(ctx) + check_imbalance(ctx)
