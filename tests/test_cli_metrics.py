"""`--metrics`: the Prometheus endpoint of `gpuwhy watch` and `gpuwhy run`.

`watch --replay` serves a recording's GPU samples (constructed, shaped like an H100 and a T4
under load: test_cli_watch.py); its endpoint is read over HTTP and parsed by prometheus_client's
own parser. `run` is scraped by a real Prometheus server (Debian's `prometheus`, installed by
scripts/system-packages.sh) while a real `torchrun` job trains; the values are read back through
Prometheus' HTTP query API and checked against the job's own recording and its report.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuwhy.cli import main
from gpuwhy.errors import ExitCode
from gpuwhy.report.prometheus import LIVE_DIAGNOSIS_EVERY_S, parse_address
from support import free_port
from test_cli_watch import _recording

ROOT = Path(__file__).resolve().parents[1]
DDP_JOB = ROOT / "tests" / "distributed" / "ddp_job.py"
DASHBOARD = ROOT / "docs" / "prometheus" / "grafana-dashboard.json"
SCRAPE_CONFIG = ROOT / "docs" / "prometheus" / "prometheus.yml"
# The job stays this long after its last step: longer than the live diagnosis' period, so the
# newest diagnosis has seen every step, and than a scrape interval, so a scrape has its counts.
LINGER_S = LIVE_DIAGNOSIS_EVERY_S + 2


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


def _wait_for(url: str, process: subprocess.Popen[Any], timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        try:
            return _get(url)
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing served at {url}")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("9401", ("127.0.0.1", 9401)), ("0.0.0.0:80", ("0.0.0.0", 80)), ("[::1]:9", ("::1", 9))],
)
def test_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("args", [["--metrics", "x"], ["--metrics", "70000"], ["--metrics", "h:"]])
def test_a_bad_address_is_one_line_before_anything_starts(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = tmp_path / "r.gpuwhy.db"
    code = main(["run", "--record", str(record), *args, "--", sys.executable, "-c", "pass"])
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE and err.count("\n") == 1 and "[HOST:]PORT" in err
    assert not record.exists()  # nothing was started or recorded


def test_a_taken_port_is_one_line_and_the_job_never_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(
            [
                "run",
                "--record",
                str(tmp_path / "r.gpuwhy.db"),
                "--metrics",
                str(port),
                "--",
                sys.executable,
                "-c",
                f"open({str(marker)!r}, 'w')",
            ]
        )
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE and "cannot serve metrics" in err and "free port" in err
    assert not marker.exists()


def test_watch_once_with_metrics_is_refused(tmp_path: Path) -> None:
    rec = _recording(tmp_path / "run.gpuwhy.db")
    assert main(["watch", "--replay", str(rec), "--once", "--metrics", "9"]) == ExitCode.USAGE


def test_watch_serves_every_gpus_readings_with_dcgm_exporters_labels(tmp_path: Path) -> None:
    rec = _recording(tmp_path / "run.gpuwhy.db")
    port = free_port()
    watching = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuwhy",
            "watch",
            "--replay",
            str(rec),
            "--interval",
            "0.1",
            "--metrics",
            f"127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        _wait_for(url, watching)
        deadline = time.monotonic() + 20
        samples: dict[str, list[Any]] = {}
        while time.monotonic() < deadline and "gpuwhy_gpu_power_watts" not in samples:
            time.sleep(0.2)  # the first refresh publishes the first readings
            samples = {}
            for family in text_string_to_metric_families(_get(url)):
                for sample in family.samples:
                    samples.setdefault(sample.name, []).append(sample)
        (power,) = samples["gpuwhy_gpu_power_watts"]  # only the H100 reports power
        assert power.value == 612.0
        assert power.labels["gpu"] == "0" and power.labels["modelName"].startswith("NVIDIA H100")
        assert set(power.labels) == {"gpuwhy_run", "Hostname", "gpu", "UUID", "modelName"}
        util = {s.labels["gpu"]: s.value for s in samples["gpuwhy_gpu_utilization_percent"]}
        assert util["1"] == 0 and 90 <= util["0"] <= 99
        reasons = {
            (s.labels["gpu"], s.labels["reason"]) for s in samples["gpuwhy_gpu_clock_event_reason"]
        }
        assert ("0", "power cap") in reasons and ("1", "idle") in reasons
        assert samples["gpuwhy_gpu_sm_active_ratio"][0].value == pytest.approx(0.815)
    finally:
        watching.send_signal(signal.SIGINT)
        _, err = watching.communicate(timeout=20)
        assert watching.returncode == 0, err


def _prometheus() -> str:
    found = shutil.which("prometheus")
    if found:
        return found
    message = "prometheus is not installed: run scripts/system-packages.sh"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _query(port: int, query: str) -> dict[str, float]:
    """An instant query through Prometheus' HTTP API: {rank or code: value}."""
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    answer = json.loads(_get(url))
    assert answer["status"] == "success", answer
    return {
        item["metric"].get("rank") or item["metric"].get("code", ""): float(item["value"][1])
        for item in answer["data"]["result"]
    }


@pytest.mark.slow
def test_a_real_prometheus_scrapes_a_running_data_parallel_job(tmp_path: Path) -> None:
    prometheus = _prometheus()
    job_port, prom_port = free_port(), free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: gpuwhy\n    static_configs: [{{targets: ['127.0.0.1:{job_port}']}}]\n"
    )
    server = subprocess.Popen(
        [
            prometheus,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(f"http://127.0.0.1:{prom_port}/-/ready", server)
        steps = 160
        job = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpuwhy",
                "run",
                "--metrics",
                f"127.0.0.1:{job_port}",
                "--json",
                str(tmp_path / "report.json"),
                "--record",
                str(tmp_path / "job.gpuwhy.db"),
                "--",
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc-per-node=2",
                str(DDP_JOB),
                "--steps",
                str(steps),
                "--slow-rank",
                "1",
                "--linger-s",
                str(LINGER_S),
                "--out",
                str(tmp_path / "out"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert job.returncode == 0, job.stderr[-3000:]
        assert f"metrics at http://127.0.0.1:{job_port}/metrics" in job.stderr
        report = json.loads((tmp_path / "report.json").read_text())
        rows = {str(row["rank"]): row for row in report["ranks"]["train"]}
        window = "[10m]"
        # Every rank's steps, as the recording counted them.
        counted = _query(prom_port, f"max_over_time(gpuwhy_steps_total{window})")
        assert counted == {"0": steps, "1": steps}
        assert all(rows[rank]["steps"] == steps for rank in counted)
        pids = _query(prom_port, "max by (rank, pid) (max_over_time(gpuwhy_steps_total[10m]))")
        assert set(pids) == {"0", "1"}
        # The ranks' live input wait, against the recording's per-rank figure.
        waits = _query(prom_port, f"avg_over_time(gpuwhy_data_wait_ratio{window})")
        for rank, share in waits.items():
            assert share == pytest.approx(rows[rank]["data_wait_fraction"], abs=0.1), rank
        cycle = _query(prom_port, f"quantile_over_time(0.5, gpuwhy_step_seconds{window})")
        for rank, seconds in cycle.items():
            assert seconds == pytest.approx(rows[rank]["step_cycle_s"], rel=0.2), rank
        # The live diagnosis said what the final report says.
        final = {f["code"] for f in report["findings"]}
        assert {"STRAGGLER", "INPUT_BOUND"} <= final
        newest = _query(prom_port, f"last_over_time(gpuwhy_finding{window})")
        assert set(newest) == final and set(newest.values()) == {1.0}
        # A live speed-up is of the run so far: the seconds a fix saves (the same, once the
        # training has ended) over the run time the newest diagnosis covered.
        speedups = _query(prom_port, f"last_over_time(gpuwhy_finding_speedup{window})")
        covered_s = _query(prom_port, f"last_over_time(gpuwhy_diagnosis_run_seconds{window})")[""]
        for finding in report["findings"]:
            saved_s = report["duration_s"] * (1 - 1 / finding["speedup"])
            expected = covered_s / (covered_s - saved_s)
            assert speedups[finding["code"]] == pytest.approx(expected, rel=0.03), finding
        # Every query of the sample dashboard runs; those of the job's ranks and findings
        # answer (the GPU panels stay empty on a machine without one).
        for expr in _dashboard_queries():
            answer = _query_range(prom_port, expr.replace("$run", ".*"))
            if not expr.startswith("gpuwhy_gpu_"):
                assert answer, expr
    finally:
        server.terminate()
        server.wait(timeout=30)


def _dashboard_queries() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel["targets"]]


def _query_range(port: int, query: str) -> list[Any]:
    end = time.time()
    url = f"http://127.0.0.1:{port}/api/v1/query_range?" + urllib.parse.urlencode(
        {"query": query, "start": end - 300, "end": end, "step": 1}
    )
    answer = json.loads(_get(url))
    assert answer["status"] == "success", (query, answer)
    return list(answer["data"]["result"])


def test_the_sample_dashboard_shows_only_series_gpuwhy_serves() -> None:
    """Every `gpuwhy_*` name in the dashboard is one the collector makes (a renamed series
    would leave a panel silently empty)."""
    from gpuwhy.report.prometheus import GpuwhyCollector, LiveSources

    served = {
        family.name
        for family in GpuwhyCollector(
            LiveSources(devices=list, gpus=dict), run="r", hostname="h"
        ).collect()
    }
    served |= {f"{name}_total" for name in served}  # counters' sample names
    used = {
        name
        for expr in _dashboard_queries()
        for name in re.findall(r"\bgpuwhy_[a-z_]+\b", expr)
        if name != "gpuwhy_run"  # the label
    }
    assert used and used <= served, used - served
    config = json.loads(DASHBOARD.read_text())["templating"]["list"][1]["definition"]
    assert "gpuwhy_run_elapsed_seconds" in config


def test_the_sample_scrape_config_is_valid() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        _prometheus()  # fails in CI, skips elsewhere, with the fix
        pytest.skip("promtool is not installed")
    done = subprocess.run(
        [promtool, "check", "config", str(SCRAPE_CONFIG)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
