"""The JSON report (`gpuwhy run --json FILE`, `gpuwhy report REC --json`): a public contract.

Shape (JSON Schema: src/gpuwhy/schemas/report.schema.json); fields are only ever added::

    schema_version, command, exit_code, duration_s,
    environment: {findings, facts, ...}, devices: [...],
    phases: {name: {time_s, share, steps, step_time_s: {p50, p95}, data_wait_fraction,
                    gpu_util: {device: mean %} | null, steady_time_s, one_time_s, ...}},
    findings: [{code, severity, title, evidence, fix, speedup, speedup_method}]

Device keys in ``gpu_util`` are NVML indices written as strings (JSON object keys).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuwhy._version import __version__
from gpuwhy.analysis import DeviceStats, Diagnosis, PhaseStats
from gpuwhy.analysis.ranks import RankPhase
from gpuwhy.model import JSON_SCHEMA_VERSION
from gpuwhy.report.verdict import verdict

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "report.schema.json"


def _num(value: float | None, digits: int = 4) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)


def _per_device(values: Mapping[int, float] | None, digits: int = 1) -> dict[str, float] | None:
    if not values:
        return None
    return {str(device): round(value, digits) for device, value in sorted(values.items())}


def _phase(phase: PhaseStats) -> dict[str, Any]:
    return {
        "time_s": _num(phase.time_s),
        "share": _num(phase.share),
        "steps": phase.steps,
        "step_time_s": {
            "p50": _num(phase.step_time_p50_s, 6),
            "p95": _num(phase.step_time_p95_s, 6),
        },
        "data_wait_fraction": _num(phase.data_wait_fraction),
        "gpu_util": _per_device(phase.gpu_util_pct),
        # additive fields
        "data_wait_s": _num(phase.data_wait_s),
        "data_wait_coverage": _num(phase.data_wait_coverage),
        "step_gap_s": _num(phase.step_gap_s),
        "rounds": phase.rounds,
        "sm_active": _per_device(phase.sm_active, 3),
        "kind": "pseudo" if phase.is_pseudo else "phase",
        "steady_time_s": _num(phase.steady_time_s),
        "steady_steps": phase.steady_steps,
        "steady_data_wait_s": _num(phase.steady_data_wait_s),
        "steady_wait_longest_s": _num(phase.steady_wait_longest_s),
        "steady_wait_gc_s": _num(phase.steady_wait_gc_s),
        "steady_thread_run_s": _num(phase.steady_thread_run_s),
        "steady_core_wait_s": _num(phase.steady_core_wait_s),
        "one_time_s": _num(phase.one_time_s),
        "warmup_steps": phase.warmup_steps,
        "warmup_s": _num(phase.warmup_s),
        "cold_round_s": _num(phase.cold_round_s),
        "cold_round_steps": phase.cold_round_steps,
        "lead_in_s": _num(phase.lead_in_s),
        "input_end_s": _num(phase.input_end_s),
        "repeated_warmup_s": _num(phase.repeated_warmup_s),
        "rounds_warmed": phase.rounds_warmed,
        "retraces": phase.retraces,
        "retraced_s": _num(phase.retraced_s),
        "gpu_busy": _per_device(phase.gpu_busy, 4),
    }


def _device(device: DeviceStats) -> dict[str, Any]:
    info = device.info
    return {
        "index": info.index,
        "name": info.name,
        "uuid": info.uuid,
        "pci_bus_id": info.pci_bus_id,
        "memory_total_bytes": info.memory_total_bytes,
        "compute_capability": list(info.compute_capability) if info.compute_capability else None,
        "pcie_gen_max": info.pcie_gen_max,
        "pcie_width_max": info.pcie_width_max,
        "link_bytes_per_s": _num(device.link_bytes_per_s, 0),
        "samples": device.samples,
        "util_mean_pct": _num(device.util_mean_pct, 1),
        "sm_active_mean": _num(device.sm_active_mean, 3),
        "memory_used_max_bytes": device.memory_used_max_bytes,
        "job_memory_max_bytes": device.job_memory_max_bytes,
        "job_share": _num(device.job_share, 3),
        "job_seen": device.job_seen,
    }


def _trace(kernels: Any) -> dict[str, Any]:
    """The kernel-level section of a report made from profiler traces (analysis/kernels)."""
    return {
        "source": kernels.source,
        "paths": list(kernels.paths),
        "window": dict(kernels.window) if kernels.window else None,
        "ranks": [
            {
                **{k: v for k, v in vars(rank).items() if k not in ("devices", "top_kernels")},
                "devices": {str(d): name for d, name in sorted(rank.devices.items())},
                "top_kernels": [vars(kernel) for kernel in rank.top_kernels],
            }
            for rank in kernels.ranks
        ],
    }


def _rank(row: RankPhase) -> dict[str, Any]:
    identity = row.identity
    return {
        "label": row.label,
        "rank": row.rank,
        "pid": row.pid,
        "host": row.host,
        "local_rank": identity.local_rank if identity else None,
        "node": identity.node if identity else None,
        "world_size": identity.world_size if identity else None,
        "launcher": identity.launcher if identity else None,
        "job": identity.job if identity else None,
        "steps": row.steps,
        "steady_steps": row.steady_steps,
        "step_time_p50_s": _num(row.step_time_p50_s, 6),
        "step_time_p95_s": _num(row.step_time_p95_s, 6),
        "step_cycle_s": _num(row.cycle_s, 6),
        "data_wait_per_step_s": _num(row.wait_per_step_s, 6),
        "data_wait_fraction": _num(row.wait_fraction),
        "syncs_per_step": _num(row.syncs_per_step, 3),
        "gpu": row.device,
        "gpu_uuid": row.gpu_uuid,
        "gpu_util_pct": _num(row.gpu_util_pct, 1),
    }


def _environment(diagnosis: Diagnosis) -> dict[str, Any]:
    environment = {k: v for k, v in diagnosis.environment.items() if k != "findings"}
    environment["findings"] = [f.to_dict() for f in diagnosis.environment_findings]
    return environment


def _jsonable(value: Any) -> Any:
    """Round-trip through JSON so the dict holds only JSON types (NaN and sets excluded)."""
    return json.loads(json.dumps(value, default=str, allow_nan=False))


def to_dict(diagnosis: Diagnosis) -> dict[str, Any]:
    """The report contract for one diagnosis, as plain JSON-compatible data."""
    report: dict[str, Any] = {
        "schema_version": JSON_SCHEMA_VERSION,
        "command": list(diagnosis.command),
        "command_redacted": not diagnosis.command_raw,
        "exit_code": diagnosis.exit_code,
        "duration_s": _num(diagnosis.duration_s),
        "environment": _environment(diagnosis),
        "devices": [_device(d) for d in diagnosis.devices],
        "phases": {name: _phase(p) for name, p in diagnosis.phases.items()},
        "findings": [f.to_dict() for f in diagnosis.findings],
        # additive fields
        "verdict": verdict(diagnosis),
        "framework": diagnosis.framework,
        "complete": diagnosis.complete,
        "gpuwhy_version": __version__,
    }
    nodes = diagnosis.meta.get("nodes")
    if isinstance(nodes, list) and len(nodes) > 1:
        report["nodes"] = nodes
    if diagnosis.ranks:
        report["ranks"] = {
            phase: [_rank(row) for row in rows] for phase, rows in diagnosis.ranks.items()
        }
    if diagnosis.kernels is not None:
        report["trace"] = _trace(diagnosis.kernels)
    if diagnosis.blind_spots:
        report["not_measured"] = [spot.to_dict() for spot in diagnosis.blind_spots]
    return dict(_jsonable(report))


def dumps(diagnosis: Diagnosis) -> str:
    """The report as indented JSON text."""
    return json.dumps(to_dict(diagnosis), indent=2) + "\n"


def schema() -> dict[str, Any]:
    """The report's JSON Schema (draft 2020-12)."""
    return dict(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
