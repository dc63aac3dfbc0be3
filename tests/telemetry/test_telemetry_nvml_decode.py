"""The pure NVML conversions, on values shaped like the driver's (constructed, not measured)."""

from __future__ import annotations

import math

import pynvml
import pytest

from gpuwhy.telemetry import nvml_decode as nd
from gpuwhy.telemetry.nvml import NvmlSource
from gpuwhy.telemetry.sampler import Sampler

T = nd.TimeDomain


@pytest.mark.parametrize(
    ("code", "problem", "words"),
    [
        (12, nd.NvmlProblem.NO_LIBRARY, "no NVIDIA driver"),
        (9, nd.NvmlProblem.DRIVER_NOT_LOADED, "kernel driver is not loaded"),
        (28, nd.NvmlProblem.NO_GPU, "finds no GPU"),
        (18, nd.NvmlProblem.VERSION_MISMATCH, "different versions"),
        (13, nd.NvmlProblem.VERSION_MISMATCH, "too old"),
        (4, nd.NvmlProblem.NO_PERMISSION, "not allowed"),
        (999, nd.NvmlProblem.OTHER, "NVML failed to start"),
    ],
)
def test_init_errors_are_classified_from_real_pynvml_exceptions(code, problem, words) -> None:
    error = pynvml.NVMLError(code)  # pynvml maps the code to its own subclass
    assert isinstance(error, pynvml.NVMLError) and error.value == code
    result = nd.classify_nvml_error(error)
    assert result.problem is problem and words in result.message
    assert result.fix and "\n" not in result.one_line()


def test_a_missing_binding_is_no_library() -> None:
    result = nd.classify_nvml_error(ImportError("No module named 'pynvml'"))
    assert result.problem is nd.NvmlProblem.NO_LIBRARY and "nvidia-ml-py" in result.fix


def test_this_machine_is_classified_without_raising() -> None:
    source = NvmlSource()
    if source.available():
        source.close()
        pytest.skip("NVML works here: covered by the gpu-marked live test")
    assert source.problem is not None and source.unavailable_reason
    assert "\n" not in source.unavailable_reason
    # The sampler records it as unavailable, not degraded, and never calls open().
    sampler = Sampler([source], lambda record: None)
    assert sampler.start() == []
    sampler.stop()
    assert sampler.unavailable == {"nvml": source.unavailable_reason}
    assert sampler.degraded == {}


def test_clock_event_reasons_decode_to_names() -> None:
    assert nd.decode_clock_event_reasons(0) == []
    assert nd.decode_clock_event_reasons(None) == []
    assert nd.decode_clock_event_reasons(0x1) == ["idle"]
    assert nd.decode_clock_event_reasons(0x4 | 0x40) == ["power cap", "hardware thermal"]
    assert nd.decode_clock_event_reasons(0x8 | 0x1000) == ["hardware slowdown", "0x1000"]
    # The constants agree with the binding's own (references.md#nvml-clock-events).
    assert pynvml.nvmlClocksEventReasonSwPowerCap == 0x4
    assert pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown == 0x80
    assert nd.THROTTLING_MASK & pynvml.nvmlClocksEventReasonGpuIdle == 0
    assert nd.THROTTLING_MASK & pynvml.nvmlClocksEventReasonSwThermalSlowdown


# Clocks at one instant: monotonic 5000 s since boot, 200 s of suspend (boot clock ahead),
# wall clock an epoch time in 2026.
NOW = {T.MONOTONIC: 5_000 * 10**9, T.BOOT: 5_200 * 10**9, T.WALL: 1_795_000_000 * 10**9}


def test_epoch_microseconds_are_placed_on_the_monotonic_clock() -> None:
    stamp_us = NOW[T.WALL] // 1000 - 250_000  # 250 ms ago, as epoch µs
    assert nd.detect_time_domain(stamp_us, NOW) is T.WALL
    assert nd.to_monotonic_ns(stamp_us, T.WALL, NOW) == NOW[T.MONOTONIC] - 250_000_000


def test_boot_microseconds_are_placed_on_the_monotonic_clock() -> None:
    stamp_us = NOW[T.BOOT] // 1000 - 1_000_000  # 1 s ago, µs since boot
    assert nd.detect_time_domain(stamp_us, NOW) is T.BOOT
    assert nd.to_monotonic_ns(stamp_us, T.BOOT, NOW) == NOW[T.MONOTONIC] - 1_000_000_000


def test_stamps_that_fit_no_clock_are_refused_and_none_lands_in_the_future() -> None:
    assert nd.detect_time_domain(123, {T.WALL: NOW[T.WALL]}) is None
    assert nd.detect_time_domain(NOW[T.WALL] // 1000 + 10**9, NOW) is None  # 1000 s ahead
    slightly_ahead = NOW[T.WALL] // 1000 + 1000  # 1 ms ahead: clocks read a moment apart
    assert nd.detect_time_domain(slightly_ahead, NOW) is T.WALL
    assert nd.to_monotonic_ns(slightly_ahead, T.WALL, NOW) == NOW[T.MONOTONIC]


def test_only_samples_newer_than_the_last_seen_stamp_are_new() -> None:
    samples = [(300, 7), (100, 5), (200, 6)]
    assert nd.new_samples(samples, 0) == (300, [(100, 5), (200, 6), (300, 7)])
    assert nd.new_samples(samples, 200) == (300, [(300, 7)])
    assert nd.new_samples([], 300) == (300, [])  # NOT_FOUND on an idle GPU: keep the stamp


def test_process_shares_keep_the_newest_sample_per_pid() -> None:
    samples = [(10, 100, 40), (10, 300, 90), (11, 200, 120), (12, 50, 5)]
    shares, last = nd.latest_process_shares(samples, last_seen_us=60)
    assert shares == {10: 90, 11: 100} and last == 300
    assert nd.latest_process_shares([], 300) == ({}, 300)


def test_gpm_percent_becomes_clamped_permille() -> None:
    assert nd.gpm_permille(87.34) == 873
    assert nd.gpm_permille(100.0) == 1000
    assert nd.gpm_permille(100.2) == 1000
    assert nd.gpm_permille(-0.1) == 0
    assert nd.gpm_permille(math.nan) is None
    assert nd.gpm_permille(None) is None
    assert nd.GPM_MIN_INTERVAL_NS == 100_000_000


def test_job_usage_sums_the_job_processes_only() -> None:
    procs = [
        nd.GpuProcess(10, 2 << 30, 60),
        nd.GpuProcess(11, 1 << 30, 30),
        nd.GpuProcess(99, 5 << 30, 10),
    ]
    visible = {10: True, 11: True, 99: True}
    assert nd.job_usage(procs, frozenset({10, 11, 12}), visible) == (3 << 30, 90)
    assert nd.job_usage(procs, frozenset({12}), visible) == (0, 0)  # job not on this GPU
    assert nd.job_usage(procs, frozenset(), visible) == (None, None)  # no job to attribute
    assert nd.job_usage(None, frozenset({10}), visible) == (None, None)  # list unsupported
    heavy = [nd.GpuProcess(10, 2 << 30, 80), nd.GpuProcess(11, None, 70)]
    assert nd.job_usage(heavy, frozenset({10, 11}), visible) == (2 << 30, 100)
    no_sm = [nd.GpuProcess(10, 1 << 30, None)]
    assert nd.job_usage(no_sm, frozenset({10}), visible) == (1 << 30, None)


def test_job_usage_is_unknown_when_nvml_pids_are_from_another_namespace() -> None:
    # In a container NVML lists host pids: none is ours and some do not exist here.
    procs = [nd.GpuProcess(48_213, 4 << 30, 70)]
    assert nd.job_usage(procs, frozenset({7}), {48_213: False}) == (None, None)
