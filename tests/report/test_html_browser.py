"""The HTML report in a real headless Chromium (Debian's `chromium`: scripts/system-packages.sh).

Recordings are CONSTRUCTED through the real RecordingWriter (tests/analysis/constructed.py, and
tests/support/synth at scale): their GPU samples stand in for NVML readings on this GPU-less
machine. The page is driven over the Chrome DevTools Protocol on a pipe (stdlib only): it must
render, draw the timeline, show the findings, log no JavaScript error and make no request.
"""

from __future__ import annotations

import base64
import fcntl
import importlib.util
import json
import os
import queue
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from constructed import GPU_OK_ENV, H100, NO_GPU_ENV, Run, device

from gpuwhy.analysis import diagnose
from gpuwhy.recording import Recording
from gpuwhy.report.html.page import MAX_HTML_BYTES, write_html
from gpuwhy.traces import OpKind, load_traces
from support import kernel_traces
from support.synth import synthesize

# A real browser (Chromium, scripts/system-packages.sh): the full lane only.
pytestmark = pytest.mark.slow

GiB = 2**30
S = 1_000_000_000
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--mute-audio",
)
HOSTILE = ("<script>window.__pwned=1</script>", '"\'><img src=x onerror="window.__pwned=2">')


def chromium_binary() -> str:
    """The headless browser; skips without one, fails in CI (the setup must install it)."""
    for name in (os.environ.get("GPUWHY_CHROMIUM"), "chromium", "chromium-browser"):
        found = shutil.which(name) if name else None
        if found:
            return found
    message = "chromium is not installed: run scripts/system-packages.sh"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _high(fd: int) -> int:
    """The same pipe end on a descriptor above 9: clear of 3 and 4, which the browser uses."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Browser:
    """A minimal DevTools Protocol client over --remote-debugging-pipe (fds 3 and 4)."""

    def __init__(self, binary: str, profile: Path) -> None:
        to_browser_r, self._to_browser = (_high(fd) for fd in os.pipe())
        self._from_browser, from_browser_w = (_high(fd) for fd in os.pipe())

        # The browser reads commands on fd 3 and writes replies on fd 4: the shell puts the pipe
        # ends there and then becomes the browser.
        redirect = (
            f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w} '
            f"{to_browser_r}<&- {from_browser_w}>&-"
        )
        self.process = subprocess.Popen(
            [
                "bash",
                "-c",
                redirect,
                binary,
                *FLAGS,
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(to_browser_r, from_browser_w),
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next_id = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buffer = b""
        with os.fdopen(self._from_browser, "rb", buffering=0) as stream:
            while chunk := stream.read(65536):
                buffer += chunk
                *messages, buffer = buffer.split(b"\0")
                for message in messages:
                    self._inbox.put(json.loads(message))
        self._inbox.put(None)

    def _pump(self, deadline: float) -> bool:
        try:
            message = self._inbox.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            return False
        if message is None:
            raise RuntimeError("chromium closed the DevTools pipe")
        if "id" in message:
            self._replies[message["id"]] = message
        else:
            self.events.append(message)
        return True

    def call(
        self, method: str, session: str | None = None, timeout_s: float = 30, **params: Any
    ) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        while ident not in self._replies:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no reply to {method}")
            self._pump(deadline)
        reply = self._replies.pop(ident)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    def wait_event(self, method: str, session: str, timeout_s: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        seen = 0
        while True:
            for event in self.events[seen:]:
                if event.get("method") == method and event.get("sessionId") == session:
                    return event
            seen = len(self.events)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} event")
            self._pump(deadline)

    def close(self) -> None:
        os.close(self._to_browser)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Page:
    """One tab showing one file, with everything it logged."""

    def __init__(
        self, browser: Browser, path: Path, *, width: int = 1280, height: int = 2400
    ) -> None:
        self.browser = browser
        target = browser.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = browser.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.first_event = len(browser.events)
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.call(f"{domain}.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        started = time.monotonic()
        self.call("Page.navigate", url=path.resolve().as_uri())
        browser.wait_event("Page.loadEventFired", self.session)
        self.load_s = time.monotonic() - started

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser.call(method, self.session, **params)

    def js(self, expression: str) -> Any:
        reply = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in reply:
            raise AssertionError(f"page script failed: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def _events(self) -> Iterator[dict[str, Any]]:
        for event in self.browser.events[self.first_event :]:
            if event.get("sessionId") == self.session:
                yield event

    def problems(self) -> list[str]:
        """JavaScript exceptions, console errors/warnings and browser log errors (CSP...)."""
        found = []
        for event in self._events():
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails']}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in (
                "error",
                "assert",
                "warning",
            ):
                found.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                found.append(f"log: {params['entry'].get('text')}")
        return found

    def requests(self) -> list[str]:
        return [
            e["params"]["request"]["url"]
            for e in self._events()
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def mouse(self, kind: str, x: float, y: float, **extra: Any) -> None:
        self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, **extra)

    def drag(self, x0: float, x1: float, y: float) -> None:
        self.mouse("mousePressed", x0, y, button="left", clickCount=1)
        for step in range(1, 6):
            self.mouse("mouseMoved", x0 + (x1 - x0) * step / 5, y, button="left", buttons=1)
        self.mouse("mouseReleased", x1, y, button="left", clickCount=1)

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])

    def close(self) -> None:
        target = self.call("Target.getTargetInfo")["targetInfo"]["targetId"]
        self.browser.call("Target.closeTarget", targetId=target)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    binary = chromium_binary()
    with tempfile.TemporaryDirectory(prefix="gpuwhy-chromium-") as profile:
        client = Browser(binary, Path(profile))
        try:
            yield client
        finally:
            client.close()


# ---- recordings -------------------------------------------------------------------------------


def input_bound_run(
    path: Path,
    *,
    phase: str = "train",
    command: tuple[str, ...] = ("python", "train.py", "--epochs", "1"),
) -> Recording:
    """CONSTRUCTED: two GPUs, training waits for data 60 % of the time, GPU 1 never used."""
    run = Run(
        path,
        duration_s=12,
        devices=[H100, device(1)],
        environment=GPU_OK_ENV,
        command=list(command),
    )
    end = run.steps(phase, 1, 100, 0.04, wait_s=0.06)
    run.phase(phase, 1, end).phase("validation", end, 12)
    run.steps("validation", end, 5, 0.1)
    common = {
        "memory_used_bytes": 3 * GiB,
        "job_memory_bytes": GiB,
        "pcie_rx_kbps": 400_000,
        "pcie_tx_kbps": 20_000,
    }
    run.gpu(0, 1, end, util_gpu_pct=30, power_mw=200_000, **common)
    run.gpu(0, end, 12, util_gpu_pct=90, power_mw=500_000, **common)
    run.gpu(1, 0, 12, util_gpu_pct=0, memory_used_bytes=0)
    run.host(0, 12, every_s=0.1, cpu_system_pct=40.0, job_cpu_pct=180.0)
    run.event(0.5, "hook", "keras", framework="keras", backend="tensorflow")
    return run.close()


def synthetic(path: Path, *, hours: float, gpus: int) -> Recording:
    """CONSTRUCTED at scale by tests/support/synth (shaped like a training run, labelled
    synthetic in the recording's meta): GPUs at 10 Hz, epochs, validation, input stalls."""
    synthesize(path, hours=hours, gpus=gpus, rate_hz=10.0, seed=3)
    return Recording.open(path)


def _report(recording: Recording, path: Path) -> Path:
    with recording:
        write_html(diagnose(recording), recording, path)
    return path


def _lanes(page: Page) -> list[dict[str, Any]]:
    """Per lane canvas: its box and how many of its pixels are not blank."""
    return list(
        page.js("""[...document.querySelectorAll('canvas.tl-canvas')].map(c => {
        const box = c.getBoundingClientRect();
        const copy = document.createElement('canvas');  // read a copy: the page's own
        copy.width = c.width; copy.height = c.height;   // canvases stay as the page made them
        const g = copy.getContext('2d', {willReadFrequently: true});
        g.drawImage(c, 0, 0);
        const d = g.getImageData(0, 0, c.width, c.height).data;
        let ink = 0; const colours = new Set();
        for (let i = 0; i < d.length; i += 4) {
          if (d[i + 3] > 0) { ink++; colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]); }
        }
        return {top: box.top + scrollY, left: box.left, width: box.width, height: box.height,
                ink: ink, pixels: d.length / 4, colours: colours.size};
      })""")
    )


def _tooltip_at(page: Page, lane: dict[str, Any], t_s: float, y_offset: float = 30) -> str:
    """Hover over a lane at time t (whole-run view) and read the tooltip's text."""
    left, width = map(float, page.js("document.getElementById('tl').dataset.plot").split(","))
    start, end = map(float, page.js("document.getElementById('tl').dataset.view").split(","))
    x = lane["left"] + left + (t_s - start) / (end - start) * width
    page.js(f"window.scrollTo(0, {lane['top'] - 200})")
    y = lane["top"] - float(page.js("scrollY")) + y_offset
    page.mouse("mouseMoved", x, y)
    return str(page.js("document.querySelector('.tl-tip').innerText"))


# ---- tests ------------------------------------------------------------------------------------


def test_report_renders_findings_and_timeline_without_errors(
    browser: Browser, tmp_path: Path
) -> None:
    recording = input_bound_run(tmp_path / "r.db")
    diagnosis = diagnose(recording)
    path = _report(recording, tmp_path / "report.html")
    page = Page(browser, path)
    assert page.js("document.getElementById('tl').dataset.ready") == "1"
    codes = page.js(
        "[...document.querySelectorAll('#findings [data-code]')].map(e => e.dataset.code)"
    )
    assert codes == [f.code for f in diagnosis.findings]
    assert codes[0] == "INPUT_BOUND"
    lanes = _lanes(page)
    titles = page.js("[...document.querySelectorAll('.tl-lane-name')].map(e => e.textContent)")
    assert titles == [
        "GPU 0 · NVIDIA H100 80GB HBM3 (constructed)",
        "GPU 1 · NVIDIA H100 80GB HBM3 (constructed)",
        "Host",
    ]
    for lane in lanes:
        assert lane["ink"] > 0.2 * lane["pixels"], lane  # charts, bands and labels drawn
        assert lane["colours"] > 20, lane
    # The drawn values are the recorded ones: GPU 0 at 30 % while waiting, 90 % in validation.
    assert "GPU utilization: 30 %" in _tooltip_at(page, lanes[0], 5.0)
    text = _tooltip_at(page, lanes[0], 11.5)
    assert "GPU utilization: 90 %" in text
    assert "phase: validation" in text
    assert "power: 500 W" in text
    assert "machine CPU: 40 %" in _tooltip_at(page, lanes[2], 6.0)
    assert page.problems() == []
    assert page.requests() == [path.resolve().as_uri()]
    page.close()


def test_drag_zooms_in_and_buttons_zoom_back_out(browser: Browser, tmp_path: Path) -> None:
    recording = synthetic(tmp_path / "r.db", hours=0.25, gpus=1)
    path = _report(recording, tmp_path / "report.html")
    page = Page(browser, path)
    view = page.js("document.getElementById('tl').dataset.view")
    assert view == "0.0000,900.0000"
    coarse_tier = int(page.js("document.getElementById('tl').dataset.tier"))
    assert coarse_tier > 0  # 9 000 samples across ~1 100 pixels: a downsampled tier
    lane = _lanes(page)[0]
    page.js(f"window.scrollTo(0, {lane['top'] - 200})")
    y = lane["top"] - float(page.js("scrollY")) + 30
    left, width = map(float, page.js("document.getElementById('tl').dataset.plot").split(","))
    start = lane["left"] + left + 100
    page.drag(start, start + width / 100, y)  # 1 % of the plot: 9 s of the run
    page.js("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    t0, t1 = map(float, page.js("document.getElementById('tl').dataset.view").split(","))
    assert 5 < t1 - t0 < 15
    assert page.js("document.getElementById('tl').dataset.tier") == "0"  # every sample
    assert "every sample" in page.js("document.querySelector('.tl-status').textContent")
    page.js("document.querySelector('.tl-toolbar button[title^=\"show the whole\"]').click()")
    page.js("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert page.js("document.getElementById('tl').dataset.view") == "0.0000,900.0000"
    # Unticking a chart takes it out of every lane (and out of the tooltip).
    height = page.js("document.querySelector('canvas.tl-canvas').offsetHeight")
    page.js("document.querySelector('input[data-chart=\"mem\"]').click()")
    page.js("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert page.js("document.querySelector('canvas.tl-canvas').offsetHeight") == height - 60
    assert "memory used" not in _tooltip_at(page, _lanes(page)[0], 100.0)
    assert "GPU utilization" in _tooltip_at(page, _lanes(page)[0], 100.0)
    assert page.problems() == []
    page.close()


def test_hostile_names_are_shown_as_text_and_never_run(browser: Browser, tmp_path: Path) -> None:
    command = ("python", "train.py", *HOSTILE, "--api-key", "s3cr3t-value", "HF_TOKEN=hf_x")
    recording = input_bound_run(tmp_path / "r.db", phase=HOSTILE[0] + HOSTILE[1], command=command)
    path = _report(recording, tmp_path / "report.html")
    page = Page(browser, path)
    assert page.js("window.__pwned === undefined")
    assert page.js("document.querySelectorAll('img').length") == 0
    assert page.js("document.scripts.length") == 2  # the data block and the report's own
    text = page.js("document.body.innerText")
    assert HOSTILE[0] in text and HOSTILE[1] in text  # shown, as text
    assert "s3cr3t-value" not in text and "hf_x" not in text
    assert "--api-key '***'" in text and "'HF_TOKEN=***'" in text
    phase = page.js("document.querySelector('tr[data-phase] .phase-name').textContent")
    assert phase == HOSTILE[0] + HOSTILE[1]
    assert page.problems() == []  # a blocked inline script would log a CSP error
    assert page.requests() == [path.resolve().as_uri()]  # an <img src=x> would load x
    page.close()


def test_cpu_only_run_shows_host_lane_and_environment_error(
    browser: Browser, tmp_path: Path
) -> None:
    run = Run(tmp_path / "r.db", duration_s=8, environment=NO_GPU_ENV)
    end = run.steps("train", 1, 50, 0.1)
    run.phase("train", 1, end)
    run.host(0, 8, every_s=0.5, cpu_system_pct=95.0, job_cpu_pct=390.0)
    path = _report(run.close(), tmp_path / "report.html")
    page = Page(browser, path)
    assert page.js("document.querySelectorAll('canvas.tl-canvas').length") == 1
    assert "No GPU samples" in page.js("document.getElementById('tl').innerText")
    assert page.js(
        "[...document.querySelectorAll('#environment [data-code]')].map(e => e.dataset.code)"
    ) == ["NO_DRIVER"]
    lane = _lanes(page)[0]
    assert lane["ink"] > 0.2 * lane["pixels"]
    assert "machine CPU: 95 %" in _tooltip_at(page, lane, 4.2)  # samples 0.5 s apart: bridged
    assert page.problems() == []
    page.close()


def test_an_empty_recording_renders_without_errors(browser: Browser, tmp_path: Path) -> None:
    path = _report(Run(tmp_path / "r.db", duration_s=0).close(), tmp_path / "report.html")
    page = Page(browser, path)
    assert page.js("document.getElementById('tl').dataset.ready") == "1"
    assert page.js("document.querySelectorAll('canvas.tl-canvas').length") == 0
    assert page.problems() == []
    page.close()


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _cli_screenshot(html: Path, png: Path, profile: Path) -> bytes:
    subprocess.run(
        [
            chromium_binary(),
            *FLAGS,
            f"--user-data-dir={profile}",
            "--window-size=1280,2200",
            f"--screenshot={png}",
            html.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return png.read_bytes()


def _pixel_census(browser: Browser, tmp_path: Path, png: bytes) -> dict[str, Any]:
    """Decode the PNG in the browser: share of non-white pixels and counts of given colours."""
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><title>census</title>", encoding="utf-8")
    page = Page(browser, blank)
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    census = page.js(
        """(async () => {
        const img = new Image(); img.src = PNG_URL; await img.decode();
        const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
        const g = c.getContext('2d'); g.drawImage(img, 0, 0);
        const d = g.getImageData(0, 0, c.width, c.height).data;
        const wanted = {train: [59, 125, 216], validation: [155, 89, 182],
                        warning: [185, 119, 14]};
        const counts = {train: 0, validation: 0, warning: 0}; let ink = 0;
        for (let i = 0; i < d.length; i += 4) {
          if (d[i] < 250 || d[i + 1] < 250 || d[i + 2] < 250) ink++;
          for (const [k, v] of Object.entries(wanted))
            if (d[i] === v[0] && d[i + 1] === v[1] && d[i + 2] === v[2]) counts[k]++;
        }
        return {ink: ink / (d.length / 4), counts: counts};
      })()""".replace("PNG_URL", json.dumps(url))
    )
    page.close()
    return dict(census)


def test_screenshot_shows_the_drawn_page(browser: Browser, tmp_path: Path) -> None:
    path = _report(input_bound_run(tmp_path / "r.db"), tmp_path / "report.html")
    keep = Path(os.environ.get("GPUWHY_SCREENSHOT_DIR", tmp_path))
    shot = _cli_screenshot(path, keep / "report.png", tmp_path / "profile")
    assert _png_size(shot) == (1280, 2200)
    census = _pixel_census(browser, tmp_path, shot)
    assert census["ink"] > 0.10, census  # text, tables and charts: not a blank page
    # The phase bands (training blue, validation purple) and the warning badge are on screen.
    assert all(count >= 200 for count in census["counts"].values()), census


@pytest.mark.slow
def test_a_real_keras_run_recorded_by_gpuwhy_run(browser: Browser, tmp_path: Path) -> None:
    """Real: the bundled slow-input Keras example under `gpuwhy run` (CPU here), then its page."""
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed in this environment")
    record = tmp_path / "run.gpuwhy.db"
    example = Path(__file__).resolve().parents[2] / "examples" / "keras_slow_input.py"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuwhy",
            "run",
            "--quiet",
            "--record",
            str(record),
            "--",
            sys.executable,
            str(example),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    path = _report(Recording.open(record), tmp_path / "report.html")
    page = Page(browser, path)
    codes = page.js(
        "[...document.querySelectorAll('#findings [data-code]')].map(e => e.dataset.code)"
    )
    assert codes[0] == "INPUT_BOUND"
    lanes = _lanes(page)
    assert page.js("[...document.querySelectorAll('.tl-lane-name')].map(e => e.textContent)") == [
        "Host"
    ]  # no GPU on this machine: the host is drawn
    assert lanes[0]["ink"] > 0.2 * lanes[0]["pixels"]
    names = page.js("[...document.querySelectorAll('tr[data-phase]')].map(e => e.dataset.phase)")
    assert names[0] == "train" and "data_wait" in names
    assert page.problems() == []
    page.close()


@pytest.mark.slow
def test_one_hour_on_eight_gpus_stays_small_and_draws_fast(
    browser: Browser, tmp_path: Path
) -> None:
    recording = synthetic(tmp_path / "r.db", hours=1, gpus=8)
    diagnosis = diagnose(recording)
    started = time.perf_counter()
    path = tmp_path / "report.html"
    write_html(diagnosis, recording, path)
    write_s = time.perf_counter() - started
    recording.close()
    size = path.stat().st_size
    assert size < MAX_HTML_BYTES
    page = Page(browser, path, height=6000)
    assert page.js("document.getElementById('tl').dataset.ready") == "1"
    lanes = _lanes(page)
    assert len(lanes) == 9 and all(lane["ink"] > 0.2 * lane["pixels"] for lane in lanes)
    redraw_ms = page.js("""(() => { const t = performance.now();
        document.querySelector('.tl-toolbar button[title^="zoom in"]').click();
        return new Promise(r => requestAnimationFrame(() => r(performance.now() - t))); })()""")
    assert page.problems() == []
    print(
        f"\n1 h x 8 GPUs at 10 Hz: HTML {size / 1e6:.2f} MB, written in {write_s:.1f} s, "
        f"loaded in {page.load_s:.2f} s, zoom redraw {redraw_ms:.0f} ms"
    )
    assert redraw_ms < 1000
    page.close()


TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


def _trace_page(browser: Browser, trace: Path, tmp_path: Path) -> tuple[Page, Path, Any, Any]:
    """The trace's HTML report, opened: (page, its path, the diagnosis, the traces)."""
    from gpuwhy.analysis.kernels.diagnosis import diagnose_traces
    from gpuwhy.report.html.trace_page import write_trace_html

    traces = load_traces(str(trace))
    diagnosis = diagnose_traces(traces)
    path = tmp_path / "trace.html"
    write_trace_html(diagnosis, path, traces)
    return Page(browser, path), path, diagnosis, traces


def _kernel_view(page: Page, index: int = 0) -> tuple[float, float]:
    view = page.js(f"document.querySelectorAll('.kl')[{index}].dataset.view")
    start, end = map(float, view.split(","))
    return start, end


def _drawn(page: Page) -> None:
    """Wait for the frame a view change asked for."""
    page.js("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def _set_kernel_view(page: Page, start_ns: float, end_ns: float) -> None:
    page.js(f"document.querySelector('.kl').timeline.setView({start_ns}, {end_ns})")
    _drawn(page)


def _kernel_point(page: Page, t_ns: float, row: int, index: int = 0) -> tuple[float, float]:
    """Viewport coordinates of time t on a row (0 steps, 1 host, 2… streams) of the timeline."""
    box = page.js(
        f"(() => {{ const c = document.querySelectorAll('.kl canvas')[{index}]; "
        "c.scrollIntoView({block: 'center'}); const b = c.getBoundingClientRect(); "
        "return [b.left, b.top]; })()"
    )
    plot = page.js(f"document.querySelectorAll('.kl')[{index}].dataset.plot")
    left, width = map(float, plot.split(","))
    start, end = _kernel_view(page, index)
    x = box[0] + left + (t_ns - start) / (end - start) * width
    y = box[1] + 20 + row * 19 + 8  # kernels.js: AXIS_H, ROW_H + ROW_GAP, half a row
    return x, y


def test_a_real_profiler_trace_renders_its_kernel_timeline(
    browser: Browser, tmp_path: Path
) -> None:
    trace = TRACES / "kineto-samples" / "resnet50_num_workers_0.1623143566756.pt.trace.json.gz"
    page, path, diagnosis, traces = _trace_page(browser, trace, tmp_path)
    # The busy chart needs no script: one bar per busy bucket, the loading gaps left empty.
    timeline = diagnosis.kernels.ranks[0].busy_timeline
    bars = page.js("document.querySelectorAll('svg.kt .kt-busy rect').length")
    assert bars == sum(1 for share in timeline["busy"] if share > 0) > 200
    assert page.js("document.querySelectorAll('svg.kt .kt-steps line').length") == 6
    drawn = page.js("document.querySelector('svg.kt').getBoundingClientRect().width")
    assert drawn > 600
    # The kernel timeline: steps, host, and the one stream this trace ran its kernels on.
    streams = {(d, s) for d, s in zip(traces[0].ops.device, traces[0].ops.stream, strict=True)}
    assert int(page.js("document.querySelector('.kl').dataset.rows")) == 2 + len(streams)
    width = page.js("document.querySelector('.kl canvas').getBoundingClientRect().width")
    assert float(width) > 600
    rows = page.js("document.querySelectorAll('table.kstreams tbody tr').length")
    assert rows == len(diagnosis.kernels.ranks[0].stream_idle) == len(streams)
    whole = int(page.js("document.querySelector('.kl').dataset.drawn"))
    assert whole > 300  # zoomed out, ops share pixels: at most a few boxes a pixel column
    codes = page.js(
        "[...document.querySelectorAll('#findings [data-code]')].map(e => e.dataset.code)"
    )
    assert codes == [f.code for f in diagnosis.findings] == ["INPUT_BOUND"]
    assert "cudnn" in page.js("document.querySelector('table.ktop').innerText")
    assert page.problems() == []
    assert page.requests() == [path.resolve().as_uri()]
    page.close()


def test_the_kernel_timeline_zooms_to_single_kernels_and_names_them(
    browser: Browser, tmp_path: Path
) -> None:
    trace = TRACES / "kineto-samples" / "resnet50_num_workers_0.1623143566756.pt.trace.json.gz"
    page, _, _, traces = _trace_page(browser, trace, tmp_path)
    rank = traces[0]
    start, end = _kernel_view(page)
    first_step = min(s for _, s, _ in rank.steps)
    assert start == 0 and end == max(e for _, _, e in rank.steps) - first_step
    # The longest kernel of the second step, found from the trace itself.
    second = sorted(rank.steps, key=lambda s: s[1])[1]
    longest = max(
        (i for i in range(len(rank.ops)) if second[1] <= rank.ops.start_ns[i] < second[2]),
        key=lambda i: rank.ops.end_ns[i] - rank.ops.start_ns[i],
    )
    lo, hi = rank.ops.start_ns[longest] - first_step, rank.ops.end_ns[longest] - first_step
    # Zoom to its neighbourhood, then drag across it with a margin of its own length each side:
    # the view narrows to about that.
    _set_kernel_view(page, lo - 20 * (hi - lo), hi + 20 * (hi - lo))
    x0, y = _kernel_point(page, lo - (hi - lo), 2)
    x1, _ = _kernel_point(page, hi + (hi - lo), 2)
    page.drag(x0, x1, y)
    _drawn(page)
    start, end = _kernel_view(page)
    assert start <= lo and hi <= end and end - start < 4 * (hi - lo)
    # Hovering its middle names it, its kind and its duration.
    x, y = _kernel_point(page, (lo + hi) / 2, 2)
    page.mouse("mouseMoved", x, y)
    tip = str(page.js("document.querySelector('.kl-tip').innerText"))
    assert rank.names[rank.ops.name[longest]][:60] in tip
    kind = OpKind(rank.ops.kind[longest]).name.lower()
    assert f"{kind} · {(hi - lo) / 1e6:.2f} ms" in tip and "stream" in tip, tip
    # The host row shows the data loader's wait of the second step.
    loader = [c for c in rank.loader if second[1] <= c.start_ns < second[2]]
    assert loader
    _set_kernel_view(page, loader[0].start_ns - first_step, loader[0].end_ns - first_step)
    middle = (loader[0].start_ns + loader[0].end_ns) / 2 - first_step
    x, y = _kernel_point(page, middle, 1)
    page.mouse("mouseMoved", x, y)
    assert "data loader" in str(page.js("document.querySelector('.kl-tip').innerText"))
    # Keys, as on the run's timeline: the focused timeline zooms out and pans.
    before = _kernel_view(page)
    page.js("document.querySelector('.kl').focus()")
    for key, code in (("-", 189), ("ArrowRight", 39)):
        page.call("Input.dispatchKeyEvent", type="keyDown", key=key, windowsVirtualKeyCode=code)
        page.call("Input.dispatchKeyEvent", type="keyUp", key=key, windowsVirtualKeyCode=code)
    _drawn(page)
    after = _kernel_view(page)
    assert after[1] - after[0] == pytest.approx(2 * (before[1] - before[0]), rel=1e-6)
    assert after[0] > before[0] - (before[1] - before[0]) / 2  # panned right after zooming out
    # Double-click: every step again.
    page.mouse("mousePressed", x, y, button="left", clickCount=2)
    page.mouse("mouseReleased", x, y, button="left", clickCount=2)
    _drawn(page)
    assert _kernel_view(page) == (0, max(e for _, _, e in rank.steps) - first_step)
    assert page.problems() == []
    page.close()


def test_hostile_kernel_names_in_a_trace_are_text(browser: Browser, tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{n}", "ts": n * 100, "dur": 100}
              for n in range(3)]  # fmt: skip
    events += [
        {"ph": "X", "cat": "kernel", "name": HOSTILE[n % 2], "ts": n * 100 + 10, "dur": 50,
         "args": {"device": 0, "stream": 7, "correlation": n + 1}}
        for n in range(3)
    ]  # fmt: skip
    source = tmp_path / "hostile.pt.trace.json"
    source.write_text(json.dumps({"traceEvents": events}))
    page, path, _, _ = _trace_page(browser, source, tmp_path)
    assert HOSTILE[0] in page.js("document.body.innerText")
    # In the kernel timeline too: the tooltip shows each name as text.
    for n in range(2):
        x, y = _kernel_point(page, n * 100_000 + 35_000, 2)
        page.mouse("mouseMoved", x, y)
        assert HOSTILE[n] in str(page.js("document.querySelector('.kl-tip').innerText"))
    assert page.js("window.__pwned === undefined")
    assert page.js("document.querySelectorAll('img').length") == 0
    assert page.problems() == []
    assert page.requests() == [path.resolve().as_uri()]
    page.close()


def test_each_rank_of_a_real_two_rank_trace_gets_its_timeline(
    browser: Browser, tmp_path: Path
) -> None:
    page, _, _, traces = _trace_page(browser, TRACES / "hta" / "two_ranks", tmp_path)
    assert len(traces) == 2 and page.js("document.querySelectorAll('.kl canvas').length") == 2
    for index, trace in enumerate(traces):
        streams = {(d, s) for d, s in zip(trace.ops.device, trace.ops.stream, strict=True)}
        rows = page.js(f"document.querySelectorAll('.kl')[{index}].dataset.rows")
        assert int(rows) == 2 + len(streams)
        assert int(page.js(f"document.querySelectorAll('.kl')[{index}].dataset.drawn")) > 50
    assert page.problems() == []
    page.close()


def test_a_trace_at_the_op_budget_draws_fast(browser: Browser, tmp_path: Path) -> None:
    """CONSTRUCTED (support/kernel_traces.py): 200,000 kernels, of which the page keeps the
    budget's worth; a redraw visits only the ops in view and one box a pixel column."""
    from gpuwhy.analysis.kernels.diagnosis import diagnose_traces
    from gpuwhy.report.html.trace_page import write_trace_html

    trace = kernel_traces.big_trace(steps=200, ops_per_step=1000)
    path = tmp_path / "big.html"
    write_trace_html(diagnose_traces([trace]), path, [trace])
    page = Page(browser, path)
    width = float(page.js("document.querySelector('.kl canvas').getBoundingClientRect().width"))
    drawn = int(page.js("document.querySelector('.kl').dataset.drawn"))
    assert drawn <= 4 * width  # steps, loader and two streams: at most one box a pixel each
    redraw_ms = page.js(
        "(() => { const t = document.querySelector('.kl').timeline, s = performance.now();"
        " for (let i = 0; i < 5; i++) { t.draw(); } return (performance.now() - s) / 5; })()"
    )
    print(f"\nkernel timeline: {drawn} boxes, a redraw in {redraw_ms:.1f} ms")
    assert redraw_ms < 250, redraw_ms
    assert "ops, whole steps" in page.js("document.querySelector('.kl').innerText")
    assert page.problems() == []
    page.close()


GPU_CAPTURE = Path(__file__).resolve().parents[1] / "data" / "gpu" / "2026-11-26-nvidia-h200"


def test_a_real_h200_run_with_a_profiler_window_draws_its_kernels(
    browser: Browser, tmp_path: Path
) -> None:
    """REAL: `gpuwhy run --profile` of an input-bound PyTorch job on an H200 (the GPU-truth
    capture); `gpuwhy report` of its recording finds the window beside it."""
    from gpuwhy.cli import main

    record = GPU_CAPTURE / "torch_loader" / "window-slow.gpuwhy.db"
    path = tmp_path / "run.html"
    assert main(["report", str(record), "--html", str(path), "--json"]) == 0
    page = Page(browser, path)
    (trace,) = load_traces(str(GPU_CAPTURE / "torch_loader" / "window-slow.gpuwhy.profile"))
    # The run's own timeline, and the window's section with its kernel timeline.
    assert _lanes(page) and all(lane["ink"] > 0 for lane in _lanes(page))
    hint = page.js("document.querySelector('#kernels .hint').innerText")
    assert "5 steps profiled" in hint and "the profiler's cost" in hint
    streams = {(d, s) for d, s in zip(trace.ops.device, trace.ops.stream, strict=True)}
    assert int(page.js("document.querySelector('.kl').dataset.rows")) == 2 + len(streams)
    assert int(page.js("document.querySelector('.kl').dataset.drawn")) > 100
    # The loader's wait of the second step, on the host row: 18 ms a step on this job.
    first = min(start for _, start, _ in trace.steps)
    second = sorted(trace.steps, key=lambda s: s[1])[1]
    (load,) = [c for c in trace.loader if second[1] <= c.start_ns < second[2]]
    x, y = _kernel_point(page, (load.start_ns + load.end_ns) / 2 - first, 1)
    page.mouse("mouseMoved", x, y)
    tip = str(page.js("document.querySelector('.kl-tip').innerText"))
    assert "data loader" in tip and " ms at " in tip, tip
    assert page.problems() == []
    assert page.requests() == [path.resolve().as_uri()]
    page.close()
