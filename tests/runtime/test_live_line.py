"""The live status line's text and drawing (gpuwhy.report.live), with exact inputs.

GPU samples are constructed: they imitate NVML readings of a 16 GiB and an 80 GiB device.
"""

from __future__ import annotations

import io
import time

from gpuwhy.model import DeviceInfo, GpuSample, HostSample
from gpuwhy.report.live import LiveLine, LiveState, format_line, live_enabled
from gpuwhy.runtime.progress import Progress

GIB = 2**30
DEVICES = [DeviceInfo(0, "A", memory_total_bytes=16 * GIB), DeviceInfo(1, "B")]


def test_line_with_gpus_steps_and_input_wait() -> None:
    state = LiveState(
        elapsed_s=127.9,
        gpus=[GpuSample(1, 1, util_gpu_pct=3), GpuSample(1, 0, 97, memory_used_bytes=10 * GIB)],
        host=HostSample(1, job_cpu_pct=104.4),
        progress=Progress(steps_total=50, steps_per_s=12.44, wait_share=0.31, phase="train"),
    )
    assert format_line(state, DEVICES, 200) == (
        "gpuwhy 2:07 | GPU0 97% 10.0/16.0GiB | GPU1 3% | CPU 104% | 12.4 step/s"
        " | input wait 31% (input-bound)"
    )


def test_line_before_any_rate_and_without_gpu() -> None:
    state = LiveState(3725, [], None, Progress(1, None, 0.05, "train"))
    line = format_line(state, [], 200)
    assert line == "gpuwhy 1:02:05 | no GPU sampled | 1 steps | input wait 5%"


def test_line_is_cut_to_the_terminal_width() -> None:
    state = LiveState(1, [GpuSample(1, i, 50) for i in range(8)], None, None)
    line = format_line(state, [], 40)
    assert len(line) == 40 and line.endswith("…")


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_enabled_only_on_a_capable_terminal_and_not_quiet() -> None:
    assert live_enabled(FakeTty(), quiet=False, environ={"TERM": "xterm"})
    assert not live_enabled(FakeTty(), quiet=True, environ={"TERM": "xterm"})
    assert not live_enabled(FakeTty(), quiet=False, environ={"TERM": "dumb"})
    assert not live_enabled(io.StringIO(), quiet=False, environ={})


def test_draws_in_place_and_erases_on_stop() -> None:
    stream = FakeTty()
    line = LiveLine(stream, lambda: LiveState(1, [], None, None), lambda: [], refresh_s=0.01)
    line.start()
    deadline = time.monotonic() + 10
    while stream.getvalue().count("\r\x1b[K") < 3 and time.monotonic() < deadline:
        time.sleep(0.005)
    line.stop()
    text = stream.getvalue()
    assert text.startswith("\r\x1b[Kgpuwhy 0:01 | no GPU sampled")
    assert text.endswith("\r\x1b[K")  # nothing of ours is left on the terminal
    line.stop()
    assert stream.getvalue() == text


def test_a_state_that_cannot_be_read_ends_the_line_quietly() -> None:
    stream = FakeTty()

    def broken() -> LiveState:
        raise RuntimeError("sampler gone")

    line = LiveLine(stream, broken, lambda: [], refresh_s=0.01)
    line.start()
    assert line._thread is not None
    line._thread.join(5)
    assert not line._thread.is_alive()
    line.stop()
    assert stream.getvalue() == ""
