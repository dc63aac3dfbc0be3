"""Which framework ran the job, so that every fix names that framework's knobs.

Read from what the hooks reported (their events name the integration that fired), then from the
environment facts (the only framework installed for the job's interpreter), else unknown.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

from gpuwhy.model import Event, Finding
from gpuwhy.wire import PROCESS_EVENT


class Framework(str, enum.Enum):
    """The framework family a fix is written for."""

    KERAS_TF = "keras-tensorflow"  # Keras 3 / tf.keras on TensorFlow
    TENSORFLOW = "tensorflow"  # a custom loop over tf.data / GradientTape
    KERAS_TORCH = "keras-torch"
    KERAS_JAX = "keras-jax"
    TORCH = "torch"
    LIGHTNING = "lightning"
    JAX = "jax"
    UNKNOWN = "unknown"

    @property
    def is_keras(self) -> bool:
        return self in (Framework.KERAS_TF, Framework.KERAS_TORCH, Framework.KERAS_JAX)

    @property
    def is_tensorflow(self) -> bool:
        return self in (Framework.KERAS_TF, Framework.TENSORFLOW)

    @property
    def is_torch(self) -> bool:
        return self in (Framework.TORCH, Framework.LIGHTNING, Framework.KERAS_TORCH)


_BACKENDS = {
    "tensorflow": Framework.KERAS_TF,
    "torch": Framework.KERAS_TORCH,
    "jax": Framework.KERAS_JAX,
}


def _words(event: Event) -> str:
    parts: list[str] = [event.kind, event.message]
    parts.extend(f"{k}={v}" for k, v in event.data.items() if isinstance(v, str | int | float))
    return " ".join(parts).lower()


def _from_events(events: Iterable[Event]) -> Framework | None:
    keras = False
    backend: str | None = None
    seen: set[str] = set()
    for event in events:
        if event.kind == PROCESS_EVENT:  # a launcher's name ("torchrun") says nothing of the job
            continue
        data = event.data
        # A Keras loop ran (the hooks say so once): Keras imported alone (TensorFlow imports
        # it; a GradientTape loop builds its model with it) does not make a Keras job.
        keras = keras or data.get("framework") == "keras"
        for key in ("backend", "keras_backend"):
            value = data.get(key)
            if isinstance(value, str) and value.lower() in _BACKENDS:
                backend = value.lower()
        text = _words(event)
        for token in ("lightning", "torch", "tf.data", "tensorflow", "jax"):
            if token in text:
                seen.add(token)
    if keras:
        if backend is None:
            backend = next((b for b in ("torch", "jax", "tensorflow") if b in seen), "tensorflow")
        return _BACKENDS[backend]
    if "lightning" in seen:
        return Framework.LIGHTNING
    if "torch" in seen:
        return Framework.TORCH
    if "tf.data" in seen or "tensorflow" in seen:
        return Framework.TENSORFLOW
    if "jax" in seen:
        return Framework.JAX
    return None


def _from_facts(facts: Mapping[str, Any]) -> Framework | None:
    frameworks = facts.get("frameworks")
    names: set[str] = set()
    if isinstance(frameworks, Mapping):
        names = {str(k).lower() for k, v in frameworks.items() if v}
    elif isinstance(frameworks, list):
        for item in frameworks:
            if isinstance(item, Mapping) and item.get("name"):
                names.add(str(item["name"]).lower())
    installed = [n for n in ("tensorflow", "torch", "jax") if n in names]
    if len(installed) != 1:
        return None
    return {"tensorflow": Framework.KERAS_TF, "torch": Framework.TORCH, "jax": Framework.JAX}[
        installed[0]
    ]


def detect(events: Iterable[Event], facts: Mapping[str, Any] | None = None) -> Framework:
    """The job's framework: from the hooks' events, else the environment, else UNKNOWN."""
    found = _from_events(events)
    if found is None and facts:
        found = _from_facts(facts)
    return found or Framework.UNKNOWN


_ENV_NAMES = {
    Framework.KERAS_TF: "tensorflow",
    Framework.TENSORFLOW: "tensorflow",
    Framework.KERAS_TORCH: "torch",
    Framework.TORCH: "torch",
    Framework.LIGHTNING: "torch",
    Framework.KERAS_JAX: "jax",
    Framework.JAX: "jax",
}


def concerns_job(framework: Framework, finding: Finding) -> bool:
    """Whether an environment finding bears on a job of this framework.

    A finding about one framework (the doctor puts its name in `evidence["framework"]`: a
    CPU-only PyTorch build) says nothing about a TensorFlow job; machine-level findings (no
    driver, hidden GPUs) and anything for an unknown framework concern every job.
    """
    about = finding.evidence.get("framework")
    job = _ENV_NAMES.get(framework)
    return job is None or not isinstance(about, str) or about.lower() == job


def pick(framework: Framework, fixes: Mapping[str, str]) -> str:
    """The fix text for this framework: exact key, then its family, then "default"."""
    if framework.value in fixes:
        return fixes[framework.value]
    if framework.is_keras and "keras" in fixes:
        return fixes["keras"]
    if framework.is_tensorflow and "tensorflow" in fixes:
        return fixes["tensorflow"]
    if framework.is_torch and "torch" in fixes:
        return fixes["torch"]
    return fixes["default"]
