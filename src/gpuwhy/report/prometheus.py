"""Live metrics in the Prometheus text format: `gpuwhy run --metrics` and `gpuwhy watch --metrics`.

A scrape reads what is already in memory (the sampler's newest GPU readings, the hooks' recent
steps per rank, the newest live diagnosis): it costs the job nothing and gpuwhy microseconds.
Series are labelled so they join with dcgm-exporter's (`gpu`, `UUID`, `Hostname`,
`modelName`: references.md#dcgm-exporter-labels) and name the run (`gpuwhy_run`), the rank, the
process and the phase. A finding is a gauge per code: 1 while the newest diagnosis of the
running job reports it, with its estimated speed-up beside it. Nothing is served unless asked,
and only on localhost unless a host is given. `prometheus_client` is imported here alone, when
the flag is used.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwhy.errors import UsageError
from gpuwhy.model import NS_PER_S, DeviceInfo, Finding, GpuSample
from gpuwhy.runtime.progress import ProcessProgress
from gpuwhy.telemetry.nvml_decode import decode_clock_event_reasons

DEFAULT_HOST = "127.0.0.1"
LIVE_DIAGNOSIS_EVERY_S = 5.0
"""The running job is diagnosed this often at most: findings follow the job within seconds."""
LIVE_DIAGNOSIS_COST_SHARE = 1 / 30
"""...and less often as its recording grows: the wait after each diagnosis is at least 30 times
what it took, so the live findings cost at most about 3 % of one core whatever the run's length
(a day's recording of 8 GPUs takes about 6 s, docs/performance.md: a diagnosis every 3 minutes
then), and a scrape never waits for one."""

_INSTALL_FIX = "install it: pip install 'gpuwhy[metrics]' (or pip install prometheus_client)"


def parse_address(text: str, flag: str = "--metrics") -> tuple[str, int]:
    """`[HOST:]PORT` as (host, port); the host defaults to localhost. UsageError if malformed."""
    host, _, port_text = text.rpartition(":")
    host = host.strip("[]") or DEFAULT_HOST
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        raise UsageError(
            f"{flag} {text}: not a port",
            f"give [HOST:]PORT, e.g. {flag} 9401 (localhost) or {flag} 0.0.0.0:9401",
        )
    return host, port


@dataclass
class LiveSources:
    """Where a scrape reads from; each returns what it knows now (empty while it knows nothing)."""

    devices: Callable[[], Sequence[DeviceInfo]]
    gpus: Callable[[], Mapping[int, GpuSample]]
    processes: Callable[[], Sequence[ProcessProgress]] = list
    findings: Callable[[], Sequence[Finding]] = list
    elapsed_s: Callable[[], float | None] = lambda: None
    diagnosed_s: Callable[[], float | None] = lambda: None  # run time the findings cover


class GpuwhyCollector:
    """A prometheus_client collector: every scrape builds the families from `LiveSources`."""

    def __init__(self, sources: LiveSources, *, run: str, hostname: str) -> None:
        self.sources = sources
        self.run = run
        self.hostname = hostname

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        devices = {info.index: info for info in self.sources.devices()}
        gpu_labels = ["gpuwhy_run", "Hostname", "gpu", "UUID", "modelName"]
        gauges = {
            name: GaugeMetricFamily(f"gpuwhy_gpu_{name}", text, labels=gpu_labels)
            for name, text in (
                ("utilization_percent", "NVML utilization.gpu: % of time a kernel ran"),
                ("sm_active_ratio", "GPM/DCGM SM activity, 0..1 (Hopper and newer)"),
                ("memory_used_bytes", "GPU memory in use, all processes"),
                ("job_memory_bytes", "GPU memory held by the job's processes"),
                ("power_watts", "board power draw"),
                ("sm_clock_mhz", "SM clock"),
                ("temperature_celsius", "GPU temperature"),
            )
        }
        reasons = GaugeMetricFamily(
            "gpuwhy_gpu_clock_event_reason",
            "1 for each NVML clock-event reason active now (why clocks are held down)",
            labels=[*gpu_labels, "reason"],
        )
        for index, sample in sorted(self.sources.gpus().items()):
            info = devices.get(index)
            labels = [
                self.run,
                self.hostname,
                str(index),
                (info.uuid if info else None) or "",
                info.name if info else "",
            ]
            values = {
                "utilization_percent": sample.util_gpu_pct,
                "sm_active_ratio": _per_mille(sample.sm_active_permille),
                "memory_used_bytes": sample.memory_used_bytes,
                "job_memory_bytes": sample.job_memory_bytes,
                "power_watts": None if sample.power_mw is None else sample.power_mw / 1000,
                "sm_clock_mhz": sample.sm_clock_mhz,
                "temperature_celsius": sample.temperature_c,
            }
            for name, value in values.items():
                if value is not None:
                    gauges[name].add_metric(labels, float(value))
            for reason in decode_clock_event_reasons(sample.clock_event_reasons):
                reasons.add_metric([*labels, reason], 1.0)
        yield from gauges.values()
        yield reasons
        yield from self._ranks(CounterMetricFamily, GaugeMetricFamily, devices)
        yield from self._findings(GaugeMetricFamily)
        for name, text, value in (
            ("gpuwhy_run_elapsed_seconds", "seconds since the run began", self.sources.elapsed_s()),
            (
                "gpuwhy_diagnosis_run_seconds",
                "the run time the newest live diagnosis covers: its speed-ups are of that run",
                self.sources.diagnosed_s(),
            ),
        ):
            if value is not None:
                family = GaugeMetricFamily(name, text, labels=["gpuwhy_run"])
                family.add_metric([self.run], value)
                yield family

    def _ranks(self, counter: Any, gauge: Any, devices: Mapping[int, DeviceInfo]) -> Iterator[Any]:
        labels = ["gpuwhy_run", "Hostname", "rank", "pid", "phase", "gpu", "UUID"]
        steps = counter("gpuwhy_steps", "steps the process has run", labels=labels)
        step_s = gauge(
            "gpuwhy_step_seconds",
            "wall time per step over the last 10 s, its input wait included",
            labels=labels,
        )
        wait = gauge(
            "gpuwhy_data_wait_ratio",
            "share of the last 10 s of steps spent waiting for input",
            labels=labels,
        )
        for process in self.sources.processes():
            identity = process.identity
            uuid = process.uuid
            if uuid is None and process.device is not None and process.device in devices:
                uuid = devices[process.device].uuid
            values = [
                self.run,
                (identity.host if identity and identity.host else self.hostname),
                "" if identity is None else str(identity.rank),
                "" if process.pid is None else str(process.pid),
                process.phase or "",
                "" if process.device is None else str(process.device),
                uuid or "",
            ]
            steps.add_metric(values, float(process.steps_total))
            if process.step_s is not None:
                step_s.add_metric(values, process.step_s)
            if process.wait_share is not None:
                wait.add_metric(values, process.wait_share)
        yield from (steps, step_s, wait)

    def _findings(self, gauge: Any) -> Iterator[Any]:
        labels = ["gpuwhy_run", "Hostname", "code", "severity"]
        present = gauge(
            "gpuwhy_finding", "1 while the running job's newest diagnosis reports it", labels=labels
        )
        speedup = gauge(
            "gpuwhy_finding_speedup", "the finding's estimated whole-run speed-up", labels=labels
        )
        for finding in self.sources.findings():
            values = [self.run, self.hostname, finding.code, finding.severity.value]
            present.add_metric(values, 1.0)
            if finding.speedup is not None:
                speedup.add_metric(values, finding.speedup)
        yield from (present, speedup)


def _per_mille(value: int | None) -> float | None:
    return None if value is None else value / 1000


class MetricsServer:
    """The HTTP endpoint, bound when made (so a taken port stops gpuwhy before the job starts)."""

    def __init__(self, address: str, collector: GpuwhyCollector, flag: str = "--metrics") -> None:
        host, port = parse_address(address, flag)
        try:
            from prometheus_client import CollectorRegistry, start_http_server
        except ImportError as error:
            raise UsageError(f"{flag} needs the prometheus_client package", _INSTALL_FIX) from error
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        except OSError as error:
            raise UsageError(
                f"{flag} {address}: cannot serve metrics on {host}:{port}: {error.strerror}",
                "choose a free port, or stop what listens there",
            ) from error
        self.host = host
        self.port = int(self._server.server_port)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._server.shutdown()
            self._server.server_close()


class LiveDiagnosis:
    """Diagnoses the running job's recording now and then, off the job's path: what the
    findings gauges show. A diagnosis that fails (a recording not yet readable) is skipped."""

    def __init__(self, record: Path, *, every_s: float = LIVE_DIAGNOSIS_EVERY_S) -> None:
        self.record = record
        self.every_s = every_s
        self.findings: list[Finding] = []
        self.covered_s: float | None = None  # the run time the newest diagnosis covers
        self.diagnosed = 0  # how many diagnoses have been made
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gpuwhy-live-diagnosis", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        wait = self.every_s
        while not self._stop.wait(wait):
            started = time.monotonic()
            self.diagnose_now()
            wait = max(self.every_s, (time.monotonic() - started) / LIVE_DIAGNOSIS_COST_SHARE)

    def diagnose_now(self) -> None:
        from gpuwhy.analysis import diagnose
        from gpuwhy.recording import Recording

        try:
            with Recording.open(self.record) as recording:
                diagnosis = diagnose(recording)
            self.findings, self.covered_s = list(diagnosis.findings), diagnosis.duration_s
            self.diagnosed += 1
        except Exception:  # the recording mid-write, or a bug: the gauges keep the last answer
            return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)


def elapsed_since(start_ns: Callable[[], int | None]) -> Callable[[], float | None]:
    def elapsed() -> float | None:
        start = start_ns()
        return None if start is None else max(0.0, (time.monotonic_ns() - start) / NS_PER_S)

    return elapsed
