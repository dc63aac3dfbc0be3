"""The one-line answer at the top of every report: is the GPU used, and what matters most."""

from __future__ import annotations

from gpuwhy.analysis import Diagnosis, PhaseStats
from gpuwhy.analysis.blind_spots import HOOKS_UNAVAILABLE
from gpuwhy.analysis.framework import Framework, concerns_job
from gpuwhy.model import Finding, Severity

# Machine-level causes first: with no driver, every framework's own problem is moot.
_MACHINE_FIRST = ("NO_DRIVER", "NO_GPU", "GPUS_HIDDEN", "DRIVER_TOO_OLD", "MIG_NO_INSTANCES")


def environment_problems(diagnosis: Diagnosis) -> list[Finding]:
    """Environment errors and warnings that concern the job, machine-level causes first.

    A problem of another framework installed beside the job's (a CPU-only torch next to a
    TensorFlow job) is left to `gpuwhy doctor`; the JSON report keeps every finding.
    """
    framework = Framework(diagnosis.framework)
    shown = [
        f
        for f in diagnosis.environment_findings
        if f.severity is not Severity.INFO and concerns_job(framework, f)
    ]

    def rank(finding: Finding) -> tuple[int, int]:
        machine = _MACHINE_FIRST.index(finding.code) if finding.code in _MACHINE_FIRST else 99
        return finding.severity.rank, machine

    return sorted(shown, key=rank)


def _first_clause(title: str) -> str:
    """ "No NVIDIA driver in this container: it was started without ..." -> the part before ":".

    Environment titles say what is wrong, then why; the verdict keeps the what (the report's
    environment section below it has the whole title).
    """
    return title.split(": ", 1)[0]


def _training_phase(diagnosis: Diagnosis) -> PhaseStats | None:
    """The phase whose GPU use the verdict quotes: 'train', else the longest named phase."""
    named = [p for p in diagnosis.phases.values() if not p.is_pseudo and p.gpu_util_pct]
    train = [p for p in named if p.name == "train"]
    longest = sorted(named, key=lambda p: -p.time_s)
    return (train or longest)[0] if named else None


def gpu_busy(diagnosis: Diagnosis) -> str | None:
    """ "GPU busy 23% of 'train' time": NVML's utilization (the share of time a kernel ran).

    From the training phase's samples, else the whole run's; None when no GPU was sampled.
    Several GPUs give their range, so an idle one (IDLE_GPUS) is not averaged away.
    """
    phase = _training_phase(diagnosis)
    if phase is not None and phase.gpu_util_pct:
        values, where = list(phase.gpu_util_pct.values()), f"of '{phase.name}' time"
    else:
        values = [
            d.util_mean_pct for d in diagnosis.devices if d.samples and d.util_mean_pct is not None
        ]
        where = "while the job ran"
    if not values:
        return None
    if len(values) == 1:
        return f"GPU busy {values[0]:.0f}% {where}"
    return f"{len(values)} GPUs busy {min(values):.0f}–{max(values):.0f}% {where}"


def _headline(finding: Finding) -> str:
    text = finding.title
    if finding.speedup is not None and finding.speedup >= 1.005:
        text += f" — fixing it: ~{finding.speedup:.2f}x faster"
    return text


def verdict(diagnosis: Diagnosis) -> str:
    """A sentence a person reads first; the same in the terminal and in the JSON report."""
    top = diagnosis.findings[0] if diagnosis.findings else None
    env_errors = [f for f in environment_problems(diagnosis) if f.severity is Severity.ERROR]
    parts = []
    if env_errors and not (top is not None and top.severity is Severity.ERROR):
        parts.append(f"GPU not usable: {_first_clause(env_errors[0].title)}")
    else:
        busy = gpu_busy(diagnosis)
        if busy is not None:
            parts.append(busy)
    stepped = any(p.steps for p in diagnosis.phases.values())
    failed = diagnosis.exit_code not in (None, 0)
    if top is not None and top.severity is not Severity.INFO:
        parts.append(_headline(top))
    elif failed and not stepped:  # nothing ran to diagnose: "no problem" would be a guess
        parts.append(
            f"the job exited with code {diagnosis.exit_code} before its first step "
            "(its own output says why)"
        )
    elif not stepped:  # nothing trained where gpuwhy looks: "no problem" would be a guess
        parts.append(_no_step_seen(diagnosis))
    elif not parts:
        parts.append("No runtime problem found (no GPU use was recorded)")
    else:
        # Info findings are hints (GPU_BOUND: the healthy case's mixed precision, XLA...).
        hints = sum(1 for f in diagnosis.findings if f.severity is Severity.INFO)
        parts.append("no runtime problem found" + (f" ({_hints(hints)})" if hints else ""))
    text = "; ".join(parts)
    return text[:1].upper() + text[1:]  # a sentence, whichever part leads


def _no_step_seen(diagnosis: Diagnosis) -> str:
    """Why a job that ended well has no step: its hooks did not load (where another process
    of the job was seen, its steps make its report stand, with the line), it used no watched
    framework, or its loop is one gpuwhy does not know."""
    if any(spot.kind == HOOKS_UNAVAILABLE for spot in diagnosis.blind_spots):
        return "the job was not seen inside: gpuwhy's hooks did not load in it"
    framework = Framework(diagnosis.framework)
    if framework is Framework.UNKNOWN:
        return (
            "no training step seen: the job used none of the frameworks gpuwhy watches "
            "(TensorFlow, Keras, PyTorch, JAX)"
        )
    return (
        f"no training step seen in this {framework.value} job (a loop gpuwhy does not know "
        "can mark its steps: `gpuwhy.step()`)"
    )


def _hints(count: int) -> str:
    return "1 hint" if count == 1 else f"{count} hints"
