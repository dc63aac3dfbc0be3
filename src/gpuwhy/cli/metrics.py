"""`--metrics [HOST:]PORT` for `gpuwhy run` and `gpuwhy watch`: the Prometheus endpoint wired to
what each command has live (report/prometheus.py)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuwhy.model import DeviceInfo, GpuSample

METRICS_HELP = (
    "serve live metrics in the Prometheus text format on [HOST:]PORT (localhost unless a host "
    "is given; docs/prometheus.md); needs prometheus_client"
)


def add_argument(parser: Any) -> None:
    parser.add_argument("--metrics", metavar="[HOST:]PORT", help=METRICS_HELP)


def check_address(address: str) -> None:
    """UsageError (one line, exit 2) for a malformed `[HOST:]PORT`, before anything starts."""
    from gpuwhy.report.prometheus import parse_address

    parse_address(address)


class RunMetrics:
    """`gpuwhy run --metrics`: bound before the job starts, fed once its session runs."""

    def __init__(self, address: str, record: Path) -> None:
        from gpuwhy.report.prometheus import (
            GpuwhyCollector,
            LiveDiagnosis,
            LiveSources,
            MetricsServer,
        )

        self._session: Any = None
        self.diagnosis = LiveDiagnosis(record)
        sources = LiveSources(
            devices=lambda: list(self._session.devices) if self._session else [],
            gpus=self._gpus,
            processes=lambda: self._session.steps.processes() if self._session else [],
            findings=lambda: self.diagnosis.findings,
            elapsed_s=self._elapsed,
            diagnosed_s=lambda: self.diagnosis.covered_s,
        )
        run = record.name.removesuffix(".db").removesuffix(".gpuwhy")
        self.server = MetricsServer(
            address, GpuwhyCollector(sources, run=run, hostname=socket.gethostname())
        )

    def _gpus(self) -> Mapping[int, GpuSample]:
        sampler = self._session.sampler if self._session else None
        return sampler.latest().gpus if sampler is not None else {}

    def _elapsed(self) -> float | None:
        from gpuwhy.report.prometheus import elapsed_since

        return elapsed_since(lambda: self._session.start_ns if self._session else None)()

    def attach(self, session: Any) -> Callable[[], None]:
        """The job runs: serve its session, and diagnose it now and then."""
        self._session = session
        self.diagnosis.start()
        return self.diagnosis.stop

    def close(self) -> None:
        self.diagnosis.stop()
        self.server.close()


def watch_metrics(address: str) -> tuple[Callable[[Sequence[DeviceInfo], Any], None], Any]:
    """`gpuwhy watch --metrics`: the endpoint, and the function each refresh hands its snapshot."""
    from gpuwhy.report.prometheus import GpuwhyCollector, LiveSources, MetricsServer

    latest: dict[str, Any] = {"devices": [], "gpus": {}}

    def publish(devices: Sequence[DeviceInfo], snapshot: Any) -> None:
        latest["devices"], latest["gpus"] = list(devices), dict(snapshot.gpus)

    sources = LiveSources(devices=lambda: latest["devices"], gpus=lambda: latest["gpus"])
    server = MetricsServer(
        address, GpuwhyCollector(sources, run="watch", hostname=socket.gethostname())
    )
    return publish, server
