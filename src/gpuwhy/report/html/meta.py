"""The report's "Run" section: command, versions, devices — and nothing secret.

Only named facts are shown. The environment facts the doctor collected (including selected
environment variables) are never dumped: a report is shared, and variables carry credentials.
The command is masked by gpuwhy.redact.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from gpuwhy._version import __version__
from gpuwhy.analysis import DeviceStats, Diagnosis
from gpuwhy.durations import seconds
from gpuwhy.report.html.format import esc, number, percent, size
from gpuwhy.report.html.sections import command_text


def _get(mapping: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def _text(value: Any) -> str | None:
    return None if value is None or isinstance(value, (dict, list)) else str(value)


def _cuda_version(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return f"{value // 1000}.{value % 1000 // 10}"  # NVML encodes 12.8 as 12080
    return _text(value)


def _started(meta: Mapping[str, Any]) -> str | None:
    wall = meta.get("start_wall_s")
    if not isinstance(wall, (int, float)) or isinstance(wall, bool):
        return None
    try:
        moment = datetime.datetime.fromtimestamp(float(wall), tz=datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _frameworks(facts: Mapping[str, Any]) -> str | None:
    found = []
    frameworks = facts.get("frameworks")
    if isinstance(frameworks, Mapping):
        for name, probe in sorted(frameworks.items()):
            version = _text(_get(probe, "version"))
            if version:
                found.append(f"{name} {version}")
    keras = _text(_get(facts, "distributions", "keras", "version"))
    if keras:
        found.append(f"keras {keras}")
    return ", ".join(found) or None


def _items(diagnosis: Diagnosis) -> list[tuple[str, str | None]]:
    meta = diagnosis.meta
    facts = diagnosis.environment.get("facts")
    facts = facts if isinstance(facts, Mapping) else {}
    system = " ".join(
        v
        for v in (_text(_get(facts, "system", "os")), _text(_get(facts, "system", "release")))
        if v
    )
    python_version = _text(_get(facts, "python", "version"))
    python_path = _text(meta.get("python"))
    python = " · ".join(v for v in (python_version, python_path) if v)
    interval = meta.get("interval_s")
    dropped = meta.get("dropped", meta.get("writer_dropped"))
    return [
        ("Command", command_text(diagnosis.command, raw=diagnosis.command_raw)),
        ("Exit code", _text(diagnosis.exit_code)),
        ("Started", _started(meta)),
        ("Wall time", seconds(diagnosis.duration_s)),
        ("Host", _text(meta.get("hostname"))),
        ("Framework", diagnosis.framework if diagnosis.framework != "unknown" else None),
        ("Frameworks installed", _frameworks(facts)),
        ("Python", python or None),
        ("Operating system", system or None),
        ("NVIDIA driver", _text(_get(facts, "nvml", "driver_version"))),
        ("CUDA (driver API)", _cuda_version(_get(facts, "nvml", "cuda_driver_version"))),
        ("Sampling period", seconds(interval) if isinstance(interval, (int, float)) else None),
        ("Samples dropped", _text(dropped) if isinstance(dropped, int) else None),
        ("Recording complete", "yes" if diagnosis.complete else "no"),
        ("Recorded by", f"gpuwhy {meta['gpuwhy_version']}" if meta.get("gpuwhy_version") else None),
        ("Report by", f"gpuwhy {__version__}"),
    ]


def _device_row(device: DeviceStats) -> str:
    info = device.info
    cc = ".".join(str(v) for v in info.compute_capability) if info.compute_capability else "–"
    link = (
        f"Gen{info.pcie_gen_max} x{info.pcie_width_max}"
        if info.pcie_gen_max and info.pcie_width_max
        else "–"
    )
    util = "–" if device.util_mean_pct is None else f"{device.util_mean_pct:.0f} %"
    cells = [
        str(info.index),
        info.name,
        size(info.memory_total_bytes),
        cc,
        link,
        number(device.samples),
        util,
        percent(device.sm_active_mean),
        size(device.memory_used_max_bytes),
        size(device.job_memory_max_bytes),
        percent(device.job_share),
    ]
    return "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>"


def run_section(diagnosis: Diagnosis) -> str:
    """Command (secrets masked), versions, and the devices with their use over the run."""
    items = "".join(
        f"<dt>{esc(k)}</dt><dd>{f'<code>{esc(v)}</code>' if k == 'Command' else esc(v)}</dd>"
        for k, v in _items(diagnosis)
        if v not in (None, "")
    )
    parts = [f'<section id="run"><h2>Run</h2><dl class="meta">{items}</dl>']
    if diagnosis.devices:
        head = "".join(
            f'<th scope="col">{h}</th>'
            for h in (
                "GPU",
                "name",
                "memory",
                "compute capability",
                "PCIe link",
                "samples",
                "utilization",
                "SM active",
                "memory used (max)",
                "job's memory (max)",
                "job's share",
            )
        )
        rows = "".join(_device_row(d) for d in diagnosis.devices)
        parts.append(
            '<h3>Devices</h3><p class="hint">Utilization and SM activity are means '
            "while the job's phases ran.</p>"
            f'<div class="scroll"><table class="devices"><thead><tr>{head}</tr>'
            f"</thead><tbody>{rows}</tbody></table></div>"
        )
    else:
        parts.append('<p class="none">No GPU was recorded.</p>')
    parts.append("</section>")
    return "".join(parts)
