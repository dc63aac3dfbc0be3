"""One GPU behind NVML: its description and the per-device state NvmlSource keeps.

The state is what makes NVML's incremental calls right: the last timestamp each buffered-sample
stream returned (passed back verbatim, references.md#nvml-samples), the previous GPM sample
(references.md#nvml-gpm), the clock domain of NVML's timestamps, and the set of calls this GPU does
not support (tried once, then skipped: an exception per tick would cost more than the reading).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from gpuwhy.model import DeviceInfo, UtilKind
from gpuwhy.telemetry import nvml_decode as nd

# NVML_GPM_METRIC_SM_UTIL, _SM_OCCUPANCY, _ANY_TENSOR_UTIL, _DRAM_BW_UTIL (references.md#nvml-gpm)
_GPM_METRICS = (2, 3, 5, 10)
_SAMPLE_TYPES = {UtilKind.GPU: 1, UtilKind.MEMORY: 2}  # NVML_{GPU,MEMORY}_UTILIZATION_SAMPLES
# NVML_VALUE_TYPE_UNSIGNED_INT: how utilization samples come (references.md#nvml-samples)
_UNSIGNED_INT = 1
_NO_GPM: tuple[int | None, int | None, int | None, int | None] = (None, None, None, None)


def nvml_error_code(error: BaseException) -> int | None:
    """The NVML return code an NVMLError carries."""
    value = getattr(error, "value", None)
    return value if isinstance(value, int) else None


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class SlowReading:
    """What the slow lane last measured on one GPU (all None until its first pass)."""

    pcie_tx_kbps: int | None = None
    pcie_rx_kbps: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    job_memory_bytes: int | None = None
    job_sm_pct: int | None = None
    processes: list[nd.GpuProcess] | None = None


class NvmlDevice:
    """Handle, description and incremental-call state of one GPU."""

    def __init__(self, nvml: Any, index: int, now_ns: int) -> None:
        self.nvml = nvml
        self.index = index
        self.handle = nvml.nvmlDeviceGetHandleByIndex(index)
        self.unsupported: set[str] = set()
        self.lost: str | None = None
        self.slow = SlowReading()
        self.info = self._describe()
        self.cadence = nd.SampleCadence()
        self._last_seen_us = {kind: self._prime_samples(kind, now_ns) for kind in _SAMPLE_TYPES}
        self._domain: nd.TimeDomain | None = None
        self._not_before_ns = now_ns  # buffered samples from before gpuwhy started are not ours
        self._proc_last_seen_us = 0
        self._gpm = _NO_GPM
        self._gpm_samples: list[Any] = []
        self._gpm_last_ns = 0
        if self.info.gpm_supported:
            self._start_gpm(now_ns)

    def value(self, key: str, function: str, *args: Any) -> Any:
        """`pynvml.<function>(*args)`, or None when the GPU, the driver or the installed
        nvidia-ml-py does not give it (see nvml_decode codes); `key` names the reading."""
        if key in self.unsupported:
            return None
        call = getattr(self.nvml, function, None)
        if call is None:  # an older nvidia-ml-py without this function
            self.unsupported.add(key)
            return None
        try:
            return call(*args)
        except self.nvml.NVMLError as error:
            code = nvml_error_code(error)
            if code not in nd.VALUE_MISSING_CODES:
                raise
            if code in nd.PERMANENTLY_MISSING_CODES:
                self.unsupported.add(key)
            return None
        except self.nvml.NVMLLibraryMismatchError:
            self.unsupported.add(key)
            return None

    def _describe(self) -> DeviceInfo:
        nvml, handle, get = self.nvml, self.handle, self.value
        memory = get("info_memory", "nvmlDeviceGetMemoryInfo", handle)
        pci = get("info_pci", "nvmlDeviceGetPciInfo", handle)
        capability = get("info_cc", "nvmlDeviceGetCudaComputeCapability", handle)
        power_limit = get("info_power_limit", "nvmlDeviceGetEnforcedPowerLimit", handle)
        if power_limit is None:
            power_limit = get("info_power_mgmt", "nvmlDeviceGetPowerManagementLimit", handle)
        mig = get("info_mig", "nvmlDeviceGetMigMode", handle)
        gpm = get("info_gpm", "nvmlGpmQueryDeviceSupport", handle)
        name = get("info_name", "nvmlDeviceGetName", handle)
        uuid = get("info_uuid", "nvmlDeviceGetUUID", handle)
        return DeviceInfo(
            index=self.index,
            name=_text(name) if name is not None else f"GPU {self.index}",
            uuid=None if uuid is None else _text(uuid),
            pci_bus_id=None if pci is None else _text(pci.busId),
            memory_total_bytes=None if memory is None else int(memory.total),
            compute_capability=None
            if capability is None
            else (int(capability[0]), int(capability[1])),
            sm_clock_max_mhz=get(
                "info_max_clock", "nvmlDeviceGetMaxClockInfo", handle, nvml.NVML_CLOCK_SM
            ),
            power_limit_mw=power_limit,
            pcie_gen_max=get("info_gen", "nvmlDeviceGetMaxPcieLinkGeneration", handle),
            pcie_width_max=get("info_width", "nvmlDeviceGetMaxPcieLinkWidth", handle),
            mig_mode=None if mig is None else mig[0] == 1,
            gpm_supported=None if gpm is None else bool(gpm.isSupportedDevice),
        )

    # ---- driver-buffered utilization samples (references.md#nvml-samples)
    # ---------------------------------

    def _fetch_samples(self, kind: UtilKind, last_seen_us: int) -> list[tuple[int, int]]:
        key = f"samples_{kind.name}"
        got = self.value(
            key, "nvmlDeviceGetSamples", self.handle, _SAMPLE_TYPES[kind], last_seen_us
        )
        if got is None:  # NOT_FOUND: no new samples (an idle GPU), or unsupported (MIG)
            return []
        value_type, samples = got
        if value_type == _UNSIGNED_INT:
            return [(int(s.timeStamp), int(s.sampleValue.uiVal)) for s in samples]
        return [(int(s.timeStamp), round(s.sampleValue.dVal)) for s in samples]

    def _prime_samples(self, kind: UtilKind, now_ns: int) -> int:
        last_seen, whole_buffer = nd.new_samples(self._fetch_samples(kind, 0), 0)
        if kind is UtilKind.GPU:
            self.cadence.fetched(now_ns, 0, [stamp for stamp, _ in whole_buffer])
        return last_seen

    def buffered_samples(
        self, now_ns: int, clocks: dict[nd.TimeDomain, int]
    ) -> list[tuple[UtilKind, int, int]]:
        """(kind, monotonic t_ns, value %) of the samples NVML buffered since the last fetch."""
        found: list[tuple[UtilKind, int, int]] = []
        for kind in _SAMPLE_TYPES:
            before = self._last_seen_us[kind]
            last_seen, fresh = nd.new_samples(self._fetch_samples(kind, before), before)
            self._last_seen_us[kind] = last_seen
            if kind is UtilKind.GPU:
                self.cadence.fetched(now_ns, before, [stamp for stamp, _ in fresh])
            if fresh and self._domain is None:
                self._domain = nd.detect_time_domain(fresh[-1][0], clocks)
            if not fresh or self._domain is None:
                continue  # a clock we cannot place: no samples rather than misplaced ones
            for stamp, value in fresh:
                t_ns = nd.to_monotonic_ns(stamp, self._domain, clocks)
                if t_ns >= self._not_before_ns:
                    found.append((kind, t_ns, min(max(value, 0), 100)))
        return found

    # ---- GPM (references.md#nvml-gpm)
    # -----------------------------------------------------------------

    def _start_gpm(self, now_ns: int) -> None:
        nvml = self.nvml
        if not hasattr(nvml, "c_nvmlGpmMetricsGet_t"):  # nvidia-ml-py without GPM
            self.unsupported.add("gpm")
            return
        try:
            self._gpm_samples = [nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()]
            nvml.nvmlGpmSampleGet(self.handle, self._gpm_samples[0])
            self._gpm_last_ns = now_ns
        except nvml.NVMLError:
            self.free()
            self.unsupported.add("gpm")

    def gpm_values(self, now_ns: int) -> tuple[int | None, int | None, int | None, int | None]:
        """(SM active, occupancy, tensor active, DRAM active) permille over the last window;
        the previous window's values until ≥ 100 ms have passed since its end."""
        if "gpm" in self.unsupported or not self._gpm_samples:
            return _NO_GPM
        if now_ns - self._gpm_last_ns < nd.GPM_MIN_INTERVAL_NS:
            return self._gpm
        nvml = self.nvml
        previous, current = self._gpm_samples
        try:
            nvml.nvmlGpmSampleGet(self.handle, current)
            request = nvml.c_nvmlGpmMetricsGet_t()
            request.version = nvml.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(_GPM_METRICS)
            request.sample1, request.sample2 = previous, current
            for slot, metric in enumerate(_GPM_METRICS):
                request.metrics[slot].metricId = metric
            nvml.nvmlGpmMetricsGet(request)
        except nvml.NVMLError as error:
            if nvml_error_code(error) not in nd.VALUE_MISSING_CODES:
                raise
            return self._gpm
        values = [
            nd.gpm_permille(request.metrics[slot].value)
            if request.metrics[slot].nvmlReturn == 0
            else None
            for slot in range(len(_GPM_METRICS))
        ]
        self._gpm = (values[0], values[1], values[2], values[3])
        self._gpm_samples = [current, previous]  # the newest becomes the next window's start
        self._gpm_last_ns = now_ns
        return self._gpm

    # ---- slow lane: PCIe and processes (references.md#nvml-processes, references.md#nvml-pcie)
    # ----------------------------------

    def poll_slow(self, job_pids: frozenset[int]) -> None:
        """Measure PCIe traffic and link state and the processes on this GPU (milliseconds)."""
        import psutil

        nvml, handle, get = self.nvml, self.handle, self.value
        tx = get("pcie_tx", "nvmlDeviceGetPcieThroughput", handle, nvml.NVML_PCIE_UTIL_TX_BYTES)
        rx = get("pcie_rx", "nvmlDeviceGetPcieThroughput", handle, nvml.NVML_PCIE_UTIL_RX_BYTES)
        processes = self._processes(job_pids)
        visible = {p.pid: psutil.pid_exists(p.pid) for p in processes or []}
        memory, sm = nd.job_usage(processes, job_pids, visible)
        self.slow = SlowReading(
            pcie_tx_kbps=tx,
            pcie_rx_kbps=rx,
            pcie_gen=get("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration", handle),
            pcie_width=get("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth", handle),
            job_memory_bytes=memory,
            job_sm_pct=sm,
            processes=processes,
        )

    def _processes(self, job_pids: frozenset[int]) -> list[nd.GpuProcess] | None:
        listed = self.value("processes", "nvmlDeviceGetComputeRunningProcesses", self.handle)
        if listed is None:
            return None
        shares: dict[int, int] | None = None
        if "process_util" not in self.unsupported:
            samples = self.value(
                "process_util",
                "nvmlDeviceGetProcessUtilization",
                self.handle,
                self._proc_last_seen_us,
            )
            if "process_util" not in self.unsupported:
                # NOT_FOUND (None): no process used the SMs since the last call, so 0 for all.
                shares, self._proc_last_seen_us = nd.latest_process_shares(
                    [(int(s.pid), int(s.timeStamp), int(s.smUtil)) for s in samples or []],
                    self._proc_last_seen_us,
                )
        return [
            nd.GpuProcess(
                pid=int(p.pid),
                memory_bytes=None if p.usedGpuMemory is None else int(p.usedGpuMemory),
                sm_pct=None if shares is None else shares.get(int(p.pid), 0),
                in_job=int(p.pid) in job_pids,
            )
            for p in listed
        ]

    def free(self) -> None:
        """Release the GPM samples (safe to call twice)."""
        samples, self._gpm_samples = self._gpm_samples, []
        for sample in samples:
            with contextlib.suppress(Exception):
                self.nvml.nvmlGpmSampleFree(sample)
