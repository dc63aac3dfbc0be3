"""`gpuwhy watch`: a live view of every GPU — what nvidia-smi -l shows, plus the reasons.

Per GPU: utilization with a short history, SM activity (GPM, Hopper+) where the driver has it,
memory, power against its limit, SM clock against its maximum, temperature, the clock-event
reasons by name (throttling ones highlighted), the PCIe link against its maximum and its
traffic, and the processes on it. The view is fed by the same Sampler and sources as `run`;
rendering is a pure function of the readings, so it is tested on recorded data.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.text import Text

from gpuwhy.errors import NoDeviceError, forget_interrupt
from gpuwhy.model import DeviceInfo, GpuSample, HostSample
from gpuwhy.telemetry.nvml_decode import THROTTLING_MASK, GpuProcess, decode_clock_event_reasons
from gpuwhy.telemetry.sampler import Sampler
from gpuwhy.telemetry.source import Snapshot, Source

HISTORY = 30  # samples of utilization kept per GPU for the sparkline
_BARS = "▁▂▃▄▅▆▇█"
_GIB = 1 << 30


def sparkline(values: Iterable[int | None], width: int = HISTORY) -> str:
    """0–100 % values as block characters, newest last; a gap for a missing value."""
    chars = [
        " " if v is None else _BARS[min(max(v, 0), 100) * (len(_BARS) - 1) // 100] for v in values
    ]
    return "".join(chars[-width:])


def _pct(value: float | None, unit: str = "%") -> str:
    return "n/a" if value is None else f"{value:.0f}{unit}"


def _ratio(used: float | None, total: float | None, unit: str, scale: float = 1.0) -> str:
    if used is None:
        return "n/a"
    text = f"{used * scale:.1f}" if scale != 1.0 else f"{used:.0f}"
    if total:
        limit = f"{total * scale:.1f}" if scale != 1.0 else f"{total:.0f}"
        return f"{text} / {limit} {unit} ({100 * used / total:.0f}%)"
    return f"{text} {unit}"


def _style(util: int | None) -> str:
    # Display only: nvitop's default colour bands (10 %, 75 %; references.md#nvitop).
    if util is None:
        return "dim"
    return "red" if util < 10 else "yellow" if util < 75 else "green"


def render_gpu(
    device: DeviceInfo,
    sample: GpuSample | None,
    history: Sequence[int | None],
    processes: list[GpuProcess] | None,
    names: Mapping[int, str] | None = None,
) -> RenderableType:
    """The block of one GPU."""
    title = Text(f"GPU {device.index}  {device.name}", style="bold")
    if sample is None:
        return Group(title, Text("  no reading yet", style="dim"))
    s = sample
    util = Text("  util ")
    util.append(f"{_pct(s.util_gpu_pct):>4}", style=_style(s.util_gpu_pct))
    util.append(f"  {sparkline(history)}", style=_style(s.util_gpu_pct))
    util.append(f"   memory busy {_pct(s.util_mem_pct)}")
    lines: list[RenderableType] = [title, util]
    # GPM: what "busy" means (references.md#busy-is-not-sm-activity)
    if s.sm_active_permille is not None:
        gpm = Text("  SM active ")
        gpm.append(_pct(s.sm_active_permille / 10), style="bold")
        gpm.append(
            f"  occupancy {_pct(_tenth(s.sm_occupancy_permille))}"
            f"  tensor {_pct(_tenth(s.tensor_active_permille))}"
            f"  DRAM {_pct(_tenth(s.dram_active_permille))}"
        )
        lines.append(gpm)
    power_w = None if s.power_mw is None else s.power_mw / 1000
    limit_w = None if device.power_limit_mw is None else device.power_limit_mw / 1000
    memory = _ratio(s.memory_used_bytes, device.memory_total_bytes, "GiB", 1 / _GIB)
    lines.append(Text(f"  memory {memory}   power {_ratio(power_w, limit_w, 'W')}"))
    clocks = Text(
        f"  SM clock {_ratio(s.sm_clock_mhz, device.sm_clock_max_mhz, 'MHz')}"
        f"   temp {_pct(s.temperature_c, ' °C')}   clocks: "
    )
    reasons = decode_clock_event_reasons(s.clock_event_reasons)
    throttled = bool((s.clock_event_reasons or 0) & THROTTLING_MASK)
    clocks.append(
        ", ".join(reasons)
        if reasons
        else ("n/a" if s.clock_event_reasons is None else "full speed"),
        style="bold red" if throttled else "",
    )
    lines.append(clocks)
    lines.append(
        Text(
            f"  PCIe {_link(s.pcie_gen, s.pcie_width)}"
            f" (max {_link(device.pcie_gen_max, device.pcie_width_max)})"
            f"   TX {_mbps(s.pcie_tx_kbps)}   RX {_mbps(s.pcie_rx_kbps)}"
        )
    )
    lines.append(Text("  procs " + _processes(processes, names or {})))
    return Group(*lines)


def _tenth(permille: int | None) -> float | None:
    return None if permille is None else permille / 10


def _link(gen: int | None, width: int | None) -> str:
    return "n/a" if gen is None and width is None else f"gen {gen or '?'} ×{width or '?'}"


def _mbps(kbps: int | None) -> str:
    return "n/a" if kbps is None else f"{kbps / 1000:.1f} MB/s"


def _processes(processes: list[GpuProcess] | None, names: Mapping[int, str]) -> str:
    if processes is None:
        return "n/a"
    if not processes:
        return "none"
    parts = []
    for p in sorted(processes, key=lambda p: -(p.memory_bytes or 0)):
        memory = "?" if p.memory_bytes is None else f"{p.memory_bytes / _GIB:.1f} GiB"
        sm = "" if p.sm_pct is None else f", SM {p.sm_pct}%"
        parts.append(f"{p.pid} {names.get(p.pid, '?')} ({memory}{sm})")
    return "  ".join(parts)


def render(
    devices: Sequence[DeviceInfo],
    snapshot: Snapshot,
    history: Mapping[int, Sequence[int | None]],
    processes: Mapping[int, list[GpuProcess] | None],
    names: Mapping[int, str] | None = None,
) -> RenderableType:
    """The whole view: a host line, then one block per GPU."""
    blocks: list[RenderableType] = [_host_line(snapshot.host)]
    for device in devices:
        blocks.append(
            render_gpu(
                device,
                snapshot.gpus.get(device.index),
                history.get(device.index, ()),
                processes.get(device.index),
                names,
            )
        )
    return Group(*blocks)


def _host_line(host: HostSample | None) -> Text:
    if host is None:
        return Text("host  n/a", style="dim")
    available = (
        "n/a"
        if host.memory_available_bytes is None
        else f"{host.memory_available_bytes / _GIB:.1f} GiB"
    )
    return Text(
        f"host  CPU {_pct(host.cpu_system_pct)}   available memory {available}", style="dim"
    )


class WatchView:
    """Keeps the short history per GPU and renders the latest snapshot."""

    def __init__(self, devices: Sequence[DeviceInfo], source: Any = None) -> None:
        self.devices = list(devices)
        self.source = source  # asked for `processes(device)` if it has that method
        self.history: dict[int, collections.deque[int | None]] = {
            d.index: collections.deque(maxlen=HISTORY) for d in self.devices
        }
        self._last_t: dict[int, int] = {}
        self._names: dict[int, str] = {}

    def update(self, snapshot: Snapshot) -> None:
        for index, sample in snapshot.gpus.items():
            if self._last_t.get(index) != sample.t_ns and index in self.history:
                self._last_t[index] = sample.t_ns
                self.history[index].append(sample.util_gpu_pct)

    def renderable(self, snapshot: Snapshot) -> RenderableType:
        processes: dict[int, list[GpuProcess] | None] = {}
        lookup = getattr(self.source, "processes", None)
        for device in self.devices:
            processes[device.index] = lookup(device.index) if callable(lookup) else None
        self._name_processes(p.pid for ps in processes.values() for p in ps or [])
        return render(self.devices, snapshot, self.history, processes, self._names)

    def _name_processes(self, pids: Iterable[int]) -> None:
        import psutil

        for pid in pids:
            if pid not in self._names:
                try:
                    self._names[pid] = psutil.Process(pid).name()
                except psutil.Error:
                    self._names[pid] = "?"  # another pid namespace, or already gone


def _settle(
    sources: Sequence[Source], sleep: Callable[[float], None], timeout_s: float = 3.0
) -> None:
    """Wait for a few ticks and for slow readings (PCIe, processes) to have arrived once."""
    waited = 0.0
    while waited < 0.35 or (
        waited < timeout_s and any(getattr(source, "slow_passes", 1) < 1 for source in sources)
    ):
        sleep(0.05)
        waited += 0.05


def watch(
    sources: Sequence[Source],
    console: Console,
    *,
    interval_s: float = 1.0,
    once: bool = False,
    frames: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
    publish: Callable[[Sequence[DeviceInfo], Snapshot], None] | None = None,
) -> int:
    """Sample `sources` and show them; `once` prints one snapshot. Returns an exit code.

    The first source is asked for per-GPU processes. `frames` bounds the live loop (tests);
    Ctrl-C ends it normally. `publish` gets every refresh's snapshot (`--metrics`).
    NoDeviceError if no source could report a device.
    """
    # One snapshot needs no long period: a few quick ticks give GPM its ≥ 100 ms window.
    sampler = Sampler(
        sources, lambda record: None, interval_s=min(interval_s, 0.1) if once else interval_s
    )
    devices = sampler.start()
    if not devices and (sampler.degraded or sampler.unavailable):
        sampler.stop()
        reasons = "; ".join(
            f"{name}: {why}" for name, why in {**sampler.unavailable, **sampler.degraded}.items()
        )
        raise NoDeviceError(
            f"no GPU to watch ({reasons})", "check the driver with nvidia-smi, then try again"
        )
    view = WatchView(devices, sources[0] if sources else None)
    try:
        if once:
            _settle(sources, sleep)
            snapshot = sampler.latest()
            view.update(snapshot)
            console.print(view.renderable(snapshot))
            return 0
        from rich.live import Live

        with Live(console=console, auto_refresh=False, transient=False) as live:
            shown = 0
            while frames is None or shown < frames:
                sleep(interval_s)
                snapshot = sampler.latest()
                if publish is not None:
                    publish(devices, snapshot)
                view.update(snapshot)
                live.update(view.renderable(snapshot), refresh=True)
                shown += 1
    except KeyboardInterrupt:  # the way out of `watch`: exit 0
        forget_interrupt()
    finally:
        sampler.stop()
    return 0
