"""NvmlSource: every GPU through NVML (nvidia-ml-py), cheap calls per tick, slow ones aside.

Per tick and device (microseconds each, references.md#nvml-cost): utilization, memory, SM clock,
power, temperature, clock-event reasons, and GPM metrics on Hopper+ when ≥ 100 ms have passed since
the previous GPM sample (references.md#nvml-gpm). The driver's buffered utilization samples since
the last timestamp NVML returned (references.md#nvml-samples) cost milliseconds a fetch and carry
their own timestamps: they are fetched every few seconds (`SampleCadence`), and once more by
`drain` when sampling stops. Calls that cost milliseconds —
process lists (references.md#nvml-processes) and PCIe throughput, which blocks ~20 ms per counter
(references.md#nvml-pcie) — run on a separate "slow lane" thread every `slow_interval_s`; each tick
merges their latest result, so the sampler's period is never stretched by them. A value the GPU does
not support is None; a device that fails (e.g. GPU lost) stops being read, with an Event; if all
fail, `read` raises and the sampler marks the source degraded.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from gpuwhy.model import DeviceInfo, Event, GpuSample, Record, UtilSample
from gpuwhy.telemetry import nvml_decode as nd
from gpuwhy.telemetry.job import JobTracker
from gpuwhy.telemetry.nvml_device import NvmlDevice, SlowReading, nvml_error_code

GPU_PROCESS_EVENT = "gpu_process"
"""One of the job's processes seen on a GPU for the first time: pid, device index, UUID and the
memory it held then."""


def held_gpu(
    known: tuple[int, str | None, int] | None, data: Mapping[str, Any]
) -> tuple[int, str | None, int] | None:
    """The GPU a process uses, (index, UUID, memory), from a GPU_PROCESS_EVENT's data and what was
    known before: of several GPUs, the one where it held the most memory (a rank that opened a
    stray context on GPU 0 uses its own GPU, where its model is)."""
    device = data.get("device")
    if not isinstance(device, int) or isinstance(device, bool):
        return known
    raw_uuid, raw_memory = data.get("uuid"), data.get("memory_bytes")
    uuid = raw_uuid if isinstance(raw_uuid, str) else None
    memory = raw_memory if isinstance(raw_memory, int) else 0
    if known is None or memory > known[2]:
        return (device, uuid, memory)
    return known


def _boot_clock() -> int:
    try:
        return time.clock_gettime_ns(time.CLOCK_BOOTTIME)  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        return time.monotonic_ns()


class NvmlSource:
    """Every NVIDIA GPU of the machine; `job` names whose processes count as the job's."""

    name = "nvml"

    def __init__(
        self,
        job: JobTracker | None = None,
        *,
        slow_interval_s: float = 1.0,
        clock: Callable[[], int] = time.monotonic_ns,
        wall_clock: Callable[[], int] = time.time_ns,
        boot_clock: Callable[[], int] = _boot_clock,
    ) -> None:
        self.job = job
        self.slow_interval_s = max(slow_interval_s, 1.0)  # process lists cost ms: ≥ 1 s
        self.problem: nd.NvmlUnavailable | None = None
        self.devices: list[NvmlDevice] = []
        self._clock = clock
        self._wall_clock = wall_clock
        self._boot_clock = boot_clock
        self._nvml: Any = None
        self._initialised = False
        self._stop = threading.Event()
        self._slow_thread: threading.Thread | None = None
        self._pending: list[Record] = []  # events from open(), delivered by the first read
        self.slow_passes = 0  # completed slow-lane passes (PCIe, processes) over every GPU
        self._job_processes: dict[int, set[int]] = {}  # device -> job pids already reported

    @property
    def unavailable_reason(self) -> str | None:
        """Why NVML cannot be used here (one line with the fix), once `available()` said no."""
        return None if self.problem is None else self.problem.one_line()

    def available(self) -> bool:
        """Load NVML and count GPUs; False (with `problem` set) if none can be used."""
        if self._initialised:
            return True
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as error:  # ImportError, NVMLError, OSError from the loader
            self.problem = nd.classify_nvml_error(error)
            return False
        self._nvml, self._initialised = pynvml, True
        try:
            count = pynvml.nvmlDeviceGetCount()
        except Exception as error:
            self.problem = nd.classify_nvml_error(error)
            count = 0
        else:
            if count == 0:
                self.problem = nd.no_gpu()
        if count == 0:
            self._shutdown()
            return False
        return True

    def open(self) -> list[DeviceInfo]:
        """Describe every GPU, prime the sample timestamps and GPM, start the slow lane."""
        if not self._initialised and not self.available():
            assert self.problem is not None
            raise RuntimeError(self.problem.one_line())
        nvml = self._nvml
        now = self._clock()
        self.devices = []
        for index in range(nvml.nvmlDeviceGetCount()):
            try:
                self.devices.append(NvmlDevice(nvml, index, now))
            except nvml.NVMLError as error:  # one broken GPU must not hide the others
                reason = f"NVML error {nvml_error_code(error)}: {error}"
                self._pending.append(
                    Event(
                        now,
                        "device_lost",
                        f"GPU {index} does not answer: {reason}",
                        {"device": index, "error": reason},
                    )
                )
        if not self.devices:
            raise RuntimeError(f"no GPU answers ({len(self._pending)} found)")
        self._slow_thread = threading.Thread(
            target=self._slow_lane, name="gpuwhy-nvml-slow", daemon=True
        )
        self._slow_thread.start()
        return [device.info for device in self.devices]

    def read(self, now_ns: int) -> list[Record]:
        """A GpuSample per healthy device and the driver's new utilization samples."""
        clocks = self._clocks(now_ns)
        records: list[Record] = list(self._pending)
        self._pending.clear()
        for device in self.devices:
            if device.lost is not None:
                continue
            try:
                records.extend(self._read_device(device, now_ns, clocks))
            except self._nvml.NVMLError as error:
                device.lost = f"NVML error {nvml_error_code(error)}: {error}"
                records.append(
                    Event(
                        now_ns,
                        "device_lost",
                        f"GPU {device.index} stopped answering: {device.lost}",
                        {"device": device.index, "error": device.lost},
                    )
                )
        if self.devices and all(device.lost is not None for device in self.devices):
            raise RuntimeError(f"no GPU answers any more ({self.devices[0].lost})")
        return records

    def _clocks(self, now_ns: int) -> dict[nd.TimeDomain, int]:
        return {
            nd.TimeDomain.MONOTONIC: now_ns,
            nd.TimeDomain.WALL: self._wall_clock(),
            nd.TimeDomain.BOOT: self._boot_clock(),
        }

    def _read_device(
        self, device: NvmlDevice, now_ns: int, clocks: dict[nd.TimeDomain, int]
    ) -> list[Record]:
        nvml = self._nvml
        handle = device.handle
        get = device.value
        rates = get("utilization", "nvmlDeviceGetUtilizationRates", handle)
        memory = get("memory", "nvmlDeviceGetMemoryInfo", handle)
        reasons = get("clock_events", "nvmlDeviceGetCurrentClocksEventReasons", handle)
        if reasons is None and "clock_events" in device.unsupported:  # drivers before R535
            reasons = get("throttle", "nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        gpm = device.gpm_values(now_ns)
        slow: SlowReading = device.slow
        records: list[Record] = [
            GpuSample(
                t_ns=now_ns,
                device=device.index,
                util_gpu_pct=None if rates is None else int(rates.gpu),
                util_mem_pct=None if rates is None else int(rates.memory),
                memory_used_bytes=None if memory is None else int(memory.used),
                sm_clock_mhz=get("sm_clock", "nvmlDeviceGetClockInfo", handle, nvml.NVML_CLOCK_SM),
                power_mw=get("power", "nvmlDeviceGetPowerUsage", handle),
                temperature_c=get(
                    "temperature", "nvmlDeviceGetTemperature", handle, nvml.NVML_TEMPERATURE_GPU
                ),
                pcie_tx_kbps=slow.pcie_tx_kbps,
                pcie_rx_kbps=slow.pcie_rx_kbps,
                pcie_gen=slow.pcie_gen,
                pcie_width=slow.pcie_width,
                clock_event_reasons=reasons,
                sm_active_permille=gpm[0],
                sm_occupancy_permille=gpm[1],
                tensor_active_permille=gpm[2],
                dram_active_permille=gpm[3],
                job_memory_bytes=slow.job_memory_bytes,
                job_sm_pct=slow.job_sm_pct,
            )
        ]
        records.extend(self._new_job_processes(device, slow, now_ns))
        if device.cadence.due(now_ns):
            records.extend(self._buffered(device, now_ns, clocks))
        return records

    @staticmethod
    def _buffered(
        device: NvmlDevice, now_ns: int, clocks: dict[nd.TimeDomain, int]
    ) -> list[Record]:
        return [
            UtilSample(t_ns, device.index, kind, value)
            for kind, t_ns, value in device.buffered_samples(now_ns, clocks)
        ]

    def drain(self, now_ns: int) -> list[Record]:
        """The buffered samples not fetched yet (they are fetched every few seconds: the last
        ones of a run would be lost without this); never raises."""
        clocks = self._clocks(now_ns)
        records: list[Record] = []
        for device in self.devices:
            if device.lost is None:
                with contextlib.suppress(Exception):
                    records.extend(self._buffered(device, now_ns, clocks))
        return records

    def _new_job_processes(
        self, device: NvmlDevice, slow: SlowReading, now_ns: int
    ) -> list[Record]:
        """An event the first time each of the job's processes shows on this GPU: which GPU a
        rank uses, by the driver's own account (its UUID), not by the index the rank chose."""
        if not slow.processes:
            return []
        seen = self._job_processes.setdefault(device.index, set())
        events: list[Record] = []
        for process in slow.processes:
            if process.in_job and process.pid not in seen:
                seen.add(process.pid)
                events.append(
                    Event(
                        now_ns,
                        GPU_PROCESS_EVENT,
                        f"job process {process.pid} on GPU {device.index}",
                        {
                            "pid": process.pid,
                            "device": device.index,
                            "uuid": device.info.uuid,
                            "memory_bytes": process.memory_bytes,
                        },
                    )
                )
        return events

    def processes(self, device: int) -> list[nd.GpuProcess] | None:
        """The compute processes on one GPU as of the last slow-lane pass (None if unknown)."""
        for candidate in self.devices:
            if candidate.index == device:
                return candidate.slow.processes
        return None

    def _slow_lane(self) -> None:
        """Poll the expensive values every `slow_interval_s` until closed; never raises."""
        while not self._stop.is_set():
            job_pids = frozenset() if self.job is None else self.job.pids()
            for device in self.devices:
                if self._stop.is_set():
                    return
                if device.lost is None:
                    # A failure here is left to the fast path, which reports a lost GPU.
                    with contextlib.suppress(Exception):
                        device.poll_slow(job_pids)
            self.slow_passes += 1
            self._stop.wait(self.slow_interval_s)

    def close(self) -> None:
        """Stop the slow lane, free GPM samples, shut NVML down. Idempotent."""
        self._stop.set()
        if self._slow_thread is not None:
            self._slow_thread.join(2.0)
            self._slow_thread = None
        for device in self.devices:
            device.free()
        self._shutdown()

    def _shutdown(self) -> None:
        if self._initialised:
            self._initialised = False
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
