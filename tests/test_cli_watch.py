"""`gpuwhy watch`: no-GPU exit, and the view rendered from a real recording played back.

The recording's GPU values are constructed (shaped like an H100 under load), not measured.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from gpuwhy.cli import main
from gpuwhy.errors import ExitCode, NoDeviceError
from gpuwhy.model import DeviceInfo, GpuSample, HostSample
from gpuwhy.recording import RecordingWriter
from gpuwhy.recording.replay import ReplaySource
from gpuwhy.report.watch import render_gpu, sparkline, watch
from gpuwhy.telemetry.nvml import NvmlSource
from gpuwhy.telemetry.nvml_decode import GpuProcess

H100 = DeviceInfo(
    0,
    "NVIDIA H100 80GB HBM3 (constructed)",
    memory_total_bytes=80 << 30,
    sm_clock_max_mhz=1980,
    power_limit_mw=700_000,
    pcie_gen_max=5,
    pcie_width_max=16,
    gpm_supported=True,
)
T4 = DeviceInfo(1, "Tesla T4 (constructed)", memory_total_bytes=16 << 30)


def _busy(t_ns: int, util: int) -> GpuSample:
    return GpuSample(
        t_ns,
        0,
        util_gpu_pct=util,
        util_mem_pct=35,
        memory_used_bytes=40 << 30,
        sm_clock_mhz=1755,
        power_mw=612_000,
        temperature_c=71,
        pcie_tx_kbps=12_000,
        pcie_rx_kbps=3_400_000,
        pcie_gen=5,
        pcie_width=16,
        clock_event_reasons=0x4,
        sm_active_permille=815,
        sm_occupancy_permille=302,
        tensor_active_permille=555,
        dram_active_permille=451,
    )


def _recording(path: Path) -> Path:
    writer = RecordingWriter(path)
    writer.add_devices([H100, T4])
    for i in range(40):
        t = 10**12 + i * 50_000_000
        writer.put(_busy(t, 90 + i % 10))
        writer.put(GpuSample(t, 1, util_gpu_pct=0, memory_used_bytes=0, clock_event_reasons=1))
        writer.put(HostSample(t, cpu_system_pct=37.5, memory_available_bytes=12 << 30))
    writer.close()
    return path


def _text(renderable) -> str:
    console = Console(file=io.StringIO(), width=160, record=True)
    console.print(renderable)
    return console.export_text()


def test_one_gpu_block_names_every_reading_and_the_reasons() -> None:
    block = render_gpu(
        H100,
        _busy(1, 97),
        [0, 50, 100, None, 97],
        [GpuProcess(4321, 38 << 30, 95, in_job=True)],
        {4321: "python"},
    )
    text = _text(block)
    assert "GPU 0  NVIDIA H100 80GB HBM3 (constructed)" in text
    assert "util  97%  ▁▄█ ▇" in text
    assert "SM active 82%" in text and "tensor 56%" in text  # GPM permille shown in %
    assert "40.0 / 80.0 GiB (50%)" in text and "612 / 700 W (87%)" in text
    assert "1755 / 1980 MHz (89%)" in text and "temp 71 °C" in text
    assert "gen 5 ×16 (max gen 5 ×16)" in text and "RX 3400.0 MB/s" in text
    assert "clocks: power cap" in text
    assert "4321 python (38.0 GiB, SM 95%)" in text


def test_missing_values_read_na_and_idle_is_not_throttling() -> None:
    text = _text(render_gpu(T4, GpuSample(1, 1, util_gpu_pct=0, clock_event_reasons=1), [0], None))
    assert "SM active" not in text  # no GPM on this GPU: not shown rather than 0
    assert "power n/a" in text and "PCIe n/a" in text and "procs n/a" in text
    assert max(len(line) for line in text.splitlines()) <= 80  # fits a plain terminal
    assert "clocks: idle" in text
    assert "no reading yet" in _text(render_gpu(T4, None, [], None))


def test_sparkline() -> None:
    assert sparkline([0, 13, 25, 50, 75, 100]) == "▁▁▂▄▆█"
    assert sparkline([None, 100]) == " █"
    assert sparkline(range(100), width=3) == "▇▇▇"


def test_once_from_a_played_back_recording(tmp_path: Path, capsys) -> None:
    rec = _recording(tmp_path / "run.gpuwhy.db")
    assert main(["watch", "--replay", str(rec), "--once", "--interval", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "host  CPU 38%" in out  # 37.5 rounded for display
    assert "GPU 0  NVIDIA H100" in out and "GPU 1  Tesla T4" in out
    assert "clocks: power cap" in out and "clocks: idle" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_the_live_view_refreshes_until_its_frames_are_shown(tmp_path: Path) -> None:
    rec = _recording(tmp_path / "run.gpuwhy.db")
    out = io.StringIO()
    source = ReplaySource(rec)
    assert watch([source], Console(file=out, width=160), interval_s=0.1, frames=4) == 0
    assert "SM active 82%" in out.getvalue()
    assert source._recording is None  # the sampler closed the source


def test_no_gpu_is_one_line_and_exit_3(capsys) -> None:
    probe = NvmlSource()
    if probe.available():
        probe.close()
        pytest.skip("NVML works here: there is a GPU to watch")
    assert main(["watch", "--once"]) == ExitCode.NO_DEVICE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gpuwhy: ") and " — " in err
    assert probe.problem is not None and probe.problem.message in err


def test_no_gpu_from_the_command_line_has_no_traceback() -> None:
    probe = NvmlSource()
    if probe.available():
        probe.close()
        pytest.skip("NVML works here: there is a GPU to watch")
    out = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "watch"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 3 and "Traceback" not in out.stderr and out.stdout == ""


@pytest.mark.parametrize(
    "args",
    [["--interval", "0.01"], ["--interval", "nan"], ["--replay", "/no/such/recording.gpuwhy.db"]],
)
def test_bad_arguments_exit_2(args: list[str], capsys) -> None:
    assert main(["watch", *args]) == ExitCode.USAGE
    assert capsys.readouterr().err.count("\n") == 1


def test_sources_that_cannot_start_are_no_device(tmp_path: Path) -> None:
    with pytest.raises(NoDeviceError) as info:
        watch(
            [ReplaySource(tmp_path / "missing.gpuwhy.db")], Console(file=io.StringIO()), once=True
        )
    assert "no recording at" in info.value.one_line()
