"""NvmlSource on a real GPU: real readings within their physical ranges (needs a GPU)."""

from __future__ import annotations

import itertools
import os
import time

import pytest

from gpuwhy.model import Event, GpuSample, UtilKind, UtilSample
from gpuwhy.telemetry.job import JobTracker
from gpuwhy.telemetry.nvml import NvmlSource
from gpuwhy.telemetry.sampler import Sampler

pytestmark = pytest.mark.gpu


@pytest.fixture
def source():
    nvml = NvmlSource(JobTracker(os.getpid()))
    assert nvml.available(), nvml.unavailable_reason
    yield nvml
    nvml.close()


def test_devices_are_described(source: NvmlSource) -> None:
    devices = source.open()
    assert devices and [d.index for d in devices] == list(range(len(devices)))
    for device in devices:
        assert device.name and device.uuid and device.uuid.startswith(("GPU-", "MIG-"))
        assert device.pci_bus_id and ":" in device.pci_bus_id
        assert device.memory_total_bytes and device.memory_total_bytes > 1 << 30
        assert device.compute_capability and device.compute_capability[0] >= 3
        assert device.sm_clock_max_mhz and 300 <= device.sm_clock_max_mhz <= 4000
        if device.pcie_gen_max is not None:
            assert 1 <= device.pcie_gen_max <= 6 and device.pcie_width_max in (1, 2, 4, 8, 16, 32)
        if device.compute_capability >= (9, 0) and not device.mig_mode:
            assert device.gpm_supported


def test_readings_are_physical(source: NvmlSource) -> None:
    devices = source.open()
    first = time.monotonic_ns()
    source.read(first)
    time.sleep(1.5)  # one slow-lane pass (PCIe, processes) and a GPM window
    now = time.monotonic_ns()
    records = source.read(now)
    # This process may hold GPU memory (an earlier test used CUDA): its own gpu_process event is
    # a true reading; anything else (a failed call, a lost device) is not.
    events = [r for r in records if isinstance(r, Event)]
    assert all(e.kind == "gpu_process" and e.data["pid"] == os.getpid() for e in events), events
    samples = {r.device: r for r in records if isinstance(r, GpuSample)}
    assert sorted(samples) == [d.index for d in devices]
    for device in devices:
        s = samples[device.index]
        assert s.t_ns == now
        if not device.mig_mode:
            assert s.util_gpu_pct is not None and 0 <= s.util_gpu_pct <= 100
            assert s.util_mem_pct is not None and 0 <= s.util_mem_pct <= 100
        assert s.memory_used_bytes is not None
        assert 0 <= s.memory_used_bytes <= (device.memory_total_bytes or 0)
        assert s.sm_clock_mhz is not None and 0 < s.sm_clock_mhz <= 4000
        assert s.temperature_c is not None and 5 <= s.temperature_c <= 110
        assert s.power_mw is None or 1_000 <= s.power_mw <= 2_000_000
        assert s.clock_event_reasons is not None
        assert s.pcie_gen is None or 1 <= s.pcie_gen <= (device.pcie_gen_max or 6)
        assert s.pcie_tx_kbps is None or s.pcie_tx_kbps >= 0
        if device.gpm_supported:
            assert s.sm_active_permille is not None and 0 <= s.sm_active_permille <= 1000
        # The job is this process: its memory is what NVML lists for this pid, none if it holds
        # no CUDA context (an earlier test in this process may have made one: JAX preallocates
        # three quarters of the card).
        processes = source.processes(device.index)
        mine = [p for p in processes or [] if p.in_job]
        assert all(p.pid == os.getpid() for p in mine)
        if processes is not None and not mine:
            assert s.job_memory_bytes == 0
        for process in mine:
            assert s.job_memory_bytes == process.memory_bytes
            assert 0 < (process.memory_bytes or 0) <= s.memory_used_bytes
    buffered = [r for r in records if isinstance(r, UtilSample)]
    assert all(first - 2 * 10**9 <= r.t_ns <= now for r in buffered)
    assert {r.kind for r in buffered} <= {UtilKind.GPU, UtilKind.MEMORY}


def test_the_sampler_drives_it_at_10_hz(source: NvmlSource) -> None:
    records: list = []
    sampler = Sampler([source], records.append, interval_s=0.1)
    devices = sampler.start()
    time.sleep(2.0)
    sampler.stop()
    assert sampler.degraded == {}
    gpu = [r for r in records if isinstance(r, GpuSample)]
    assert len(gpu) >= 15 * len(devices)
    assert sampler.stats.cpu_per_tick_ns < 20_000_000  # well under the 100 ms period


def test_buffered_samples_fetched_every_few_seconds_miss_none_and_cost_little(
    source: NvmlSource,
) -> None:
    records: list = []
    sampler = Sampler([source], records.append, interval_s=0.1)
    devices = sampler.start()
    time.sleep(6.0)
    sampler.stop()
    for device in devices:
        if device.mig_mode:
            continue  # no buffered utilization samples on MIG (references.md#nvml-samples)
        times = sorted(
            r.t_ns
            for r in records
            if isinstance(r, UtilSample) and r.device == device.index and r.kind is UtilKind.GPU
        )
        gaps = sorted(b - a for a, b in itertools.pairwise(times))
        assert len(times) >= 10, times
        assert gaps[-1] < 1.5 * gaps[len(gaps) // 2]  # none missing, the last ones drained too
    # The sampler's own thread: at most 2 % of a core at 10 Hz (docs/performance.md's goal).
    assert sampler.stats.cpu_per_tick_ns < 2_000_000
