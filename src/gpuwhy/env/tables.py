"""The compatibility tables (data/*.json, each with its sources) and lookups over them."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any


def parse_version(text: str | None) -> tuple[int, ...]:
    """Leading numeric components: '2.13.0+cpu' -> (2, 13, 0), '535.104.05' -> (535, 104, 5)."""
    if not text:
        return ()
    match = re.match(r"\d+(?:\.\d+)*", text.strip())
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


def cuda_from_driver_int(value: int) -> tuple[int, int]:
    """NVML's CUDA driver version integer to (major, minor): 12080 -> (12, 8)
    (references.md#nvml-versions)."""
    return value // 1000, (value % 1000) // 10


def version_text(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version)


@functools.cache
def load_table(name: str) -> dict[str, Any]:
    """A data file of gpuwhy.env (cuda_drivers.json, frameworks.json)."""
    text = resources.files("gpuwhy.env").joinpath("data").joinpath(name).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@dataclass(frozen=True)
class DriverNeed:
    """The driver a CUDA build needs on one OS."""

    driver: str | None  # minimum driver version, None where the table has no row for this OS
    exact: bool  # False: the table lacks this CUDA release; `driver` is a lower bound
    source_cuda: str | None  # the table row used, e.g. "12.5.1"


def driver_for_cuda(cuda: str, os_key: str) -> DriverNeed:
    """Minimum driver for a CUDA toolkit release, from NVIDIA's Table 3 (cuda_drivers.json)."""
    wanted = parse_version(cuda)
    if len(wanted) < 2:
        return DriverNeed(None, False, None)
    wanted = (*wanted[:3], 0, 0)[:3]
    rows = load_table("cuda_drivers.json")["toolkits"]
    best = None
    for row in rows:  # newest first: the first row at or below the build is the one
        version = parse_version(row["cuda"])
        if version <= wanted:
            best = row
            break
    if best is None:
        return DriverNeed(None, False, None)
    same_release = parse_version(best["cuda"])[:2] == wanted[:2]
    return DriverNeed(best.get(os_key), same_release, best["cuda"])


def family_minimum_driver(cuda_major: int, os_key: str) -> str | None:
    """Minimum driver of a CUDA major family under minor-version compatibility."""
    family = load_table("cuda_drivers.json")["family_minimum"].get(str(cuda_major))
    return family.get(os_key) if family else None


def tensorflow_build(version: str | None) -> dict[str, Any] | None:
    """The tested build configuration (CUDA, cuDNN, Python) of a TensorFlow release."""
    parsed = parse_version(version)[:2]
    for row in load_table("frameworks.json")["tensorflow"]["builds"]:
        if parse_version(row["version"])[:2] == parsed:
            return dict(row)
    return None


def framework_table(framework: str) -> dict[str, Any]:
    table: dict[str, Any] = load_table("frameworks.json")[framework]
    return table
