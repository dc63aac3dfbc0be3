"""The tracks of an exported trace: process ids, counter names and units, and the counter
writer that writes a value only when it changes.

Track names: a counter event {"name": N, "args": {U: v}} shows in Perfetto as "N U" and in
chrome://tracing as counter N with series U, so N is the metric and U its unit.
"""

from __future__ import annotations

import json
from collections.abc import Callable

# Pseudo process ids for the tracks that are not processes; above Linux's largest pid (2**22).
HOST_PID = 9_999_999
GPU_PID_BASE = 10_000_000
UNKNOWN_JOB_PID = 0  # spans whose process did not say who it was
_MIB = 1 / (1 << 20)

# (GpuSample field, metric name, unit, scale)
GPU_COUNTERS: tuple[tuple[str, str, str, float], ...] = (
    ("util_gpu_pct", "GPU utilization", "%", 1),
    ("util_mem_pct", "memory busy", "%", 1),
    ("memory_used_bytes", "memory used", "MiB", _MIB),
    ("sm_clock_mhz", "SM clock", "MHz", 1),
    ("power_mw", "power", "W", 1e-3),
    ("temperature_c", "temperature", "°C", 1),
    ("pcie_tx_kbps", "PCIe TX", "KB/s", 1),
    ("pcie_rx_kbps", "PCIe RX", "KB/s", 1),
    ("pcie_gen", "PCIe link generation", "gen", 1),
    ("pcie_width", "PCIe link width", "lanes", 1),
    ("clock_event_reasons", "clock event reasons", "bitmask", 1),
    ("sm_active_permille", "SM active", "%", 0.1),
    ("sm_occupancy_permille", "SM occupancy", "%", 0.1),
    ("tensor_active_permille", "tensor active", "%", 0.1),
    ("dram_active_permille", "DRAM active", "%", 0.1),
    ("job_memory_bytes", "job memory", "MiB", _MIB),
    ("job_sm_pct", "job SM share", "%", 1),
)
HOST_COUNTERS: tuple[tuple[str, str, str, float], ...] = (
    ("cpu_system_pct", "system CPU", "%", 1),
    ("job_cpu_pct", "job CPU (100 = one core)", "%", 1),
    ("job_rss_bytes", "job resident memory", "MiB", _MIB),
    ("job_processes", "job processes", "count", 1),
    ("memory_available_bytes", "available memory", "MiB", _MIB),
)
UTIL_NAMES = {1: "GPU utilization (driver samples)", 2: "memory busy (driver samples)"}


class Counters:
    """Writes a counter only when it changes; remembers the last value of every track.

    Events go out as JSON text built from cached pieces (the track's name and unit are encoded
    once): a long export writes millions of them, and json.dumps of a dict each time would be
    most of its cost.
    """

    def __init__(self, write: Callable[[str], None]) -> None:
        self._write = write
        self._last: dict[tuple[int, str], float] = {}
        self._pieces: dict[tuple[int, str], tuple[str, str]] = {}

    def put(self, pid: int, name: str, unit: str, value: float, ts_us: float) -> None:
        key = (pid, name)
        previous = self._last.get(key)
        if previous is not None and previous == value:
            return
        self._last[key] = value
        pieces = self._pieces.get(key)
        if pieces is None:
            pieces = self._pieces[key] = (
                '{"name":' + json.dumps(name, ensure_ascii=False) + ',"ph":"C","ts":',
                f',"pid":{pid},"tid":0,"args":{{{json.dumps(unit, ensure_ascii=False)}:',
            )
        self._write(f"{pieces[0]}{ts_us!r}{pieces[1]}{value!r}}}}}")

    def close(self, ts_us: float) -> None:
        """Repeat every track's last value at the end, so its final step has a width."""
        for key, value in self._last.items():
            head, middle = self._pieces[key]
            self._write(f"{head}{ts_us!r}{middle}{value!r}}}}}")


def number(raw: float, scale: float) -> float:
    value = raw * scale
    return int(value) if scale == 1 and float(raw).is_integer() else round(value, 3)
