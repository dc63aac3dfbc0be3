"""The HTML page as text: escaping, the JSON block, the CSP, masked secrets, writing the file.

Recordings are CONSTRUCTED through the real RecordingWriter (tests/analysis/constructed.py): their
GPU samples stand in for NVML readings. The page in a real browser: test_html_browser.py.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from constructed import GPU_OK_ENV, H100, NO_GPU_ENV, Run

from gpuwhy.analysis import diagnose
from gpuwhy.errors import UsageError
from gpuwhy.model import DeviceInfo, Span, SpanKind
from gpuwhy.recording import Recording
from gpuwhy.redact import MASK, redact_command
from gpuwhy.report.html.page import render_html, script_json, write_html
from gpuwhy.report.html.phases import MAX_INTERVALS
from gpuwhy.wire import PROCESS_EVENT

GiB = 2**30
HOSTILE = ("<script>alert(1)</script>", "\"'><img src=x onerror=alert(2)>")


def _run(
    path: Path,
    *,
    phase: str = "train",
    command: tuple[str, ...] = ("python", "t.py"),
    devices: tuple[DeviceInfo, ...] = (H100,),
    environment: dict[str, Any] | None = None,
) -> Recording:
    run = Run(
        path,
        duration_s=10,
        devices=list(devices),
        command=command,
        environment=GPU_OK_ENV if environment is None else environment,
    )
    end = run.steps(phase, 1, 60, 0.05, wait_s=0.08)
    run.phase(phase, 1, end)
    run.gpu(0, 0, 10, util_gpu_pct=25, memory_used_bytes=2 * GiB)
    run.host(0, 10, every_s=0.1, cpu_system_pct=30.0, job_cpu_pct=100.0)
    return run.close()


def _page(recording: Recording) -> str:
    with recording:
        return render_html(diagnose(recording), recording)


def _data_block(page: str) -> str:
    match = re.search(
        r'<script type="application/json" id="gpuwhy-data">(.*?)</script>', page, re.DOTALL
    )
    assert match is not None
    return match.group(1)


def _scripts(page: str) -> list[str]:
    return re.findall(r"<script>(.*?)</script>", page, re.DOTALL)


def test_page_is_self_contained_with_its_findings_and_data(tmp_path: Path) -> None:
    page = _page(_run(tmp_path / "r.db"))
    assert page.startswith("<!DOCTYPE html>")
    assert re.findall(r'data-code="([A-Z_]+)"', page)[0] == "INPUT_BOUND"
    assert "≈" in page and "faster if fixed" in page
    for reference in ("http://", "https://", "src=", "<link", "@import", "url("):
        assert reference not in page, reference  # nothing fetched: no CDN, no font, no image
    data = json.loads(_data_block(page))["timeline"]
    assert [lane["title"] for lane in data["gpu_lanes"]] == [f"GPU 0 · {H100.name}"]
    assert data["host_lane"]["title"] == "Host"
    assert [p["name"] for p in data["phases"]] == ["train", "other"]


def test_csp_allows_exactly_the_inline_script_and_no_network(tmp_path: Path) -> None:
    page = _page(_run(tmp_path / "r.db"))
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert policy is not None
    (script,) = _scripts(page)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    rules = html.unescape(policy.group(1))
    assert f"script-src 'sha256-{digest}'" in rules
    assert "default-src 'none'" in rules  # connect, font, frame... all refused


def test_user_text_is_escaped_everywhere(tmp_path: Path) -> None:
    hostile = HOSTILE[0] + HOSTILE[1]
    device = DeviceInfo(index=0, name=hostile, memory_total_bytes=80 * GiB)
    page = _page(
        _run(tmp_path / "r.db", phase=hostile, command=("python", *HOSTILE), devices=(device,))
    )
    assert "<script>alert" not in page and "<img" not in page and "onerror=alert(2)>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&quot;&#x27;&gt;&lt;img src=x onerror=alert(2)&gt;" in page
    block = _data_block(page)
    assert "</" not in block and "<" not in block
    timeline = json.loads(block)["timeline"]
    assert timeline["phases"][0]["name"] == hostile  # the script gets the text back intact
    assert timeline["gpu_lanes"][0]["title"] == f"GPU 0 · {hostile}"


def test_script_json_cannot_close_its_element() -> None:
    text = script_json({"a": "</script><!-- & \u2028", "b": [1.5, None]})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><!-- & \u2028", "b": [1.5, None]}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["python", "train.py", "--hf-token", "hf_abc"],
            ["python", "train.py", "--hf-token", MASK],
        ),
        (
            ["t.py", "--password=hunter2", "--epochs", "3"],
            ["t.py", f"--password={MASK}", "--epochs", "3"],
        ),
        (
            ["t.py", "--api-key", "k", "--secret", "s", "--auth-token=x"],
            ["t.py", "--api-key", MASK, "--secret", MASK, f"--auth-token={MASK}"],
        ),
        (
            ["env", "WANDB_API_KEY=abc", "AWS_SECRET_ACCESS_KEY=def", "LR=0.1", "python", "t.py"],
            [
                "env",
                f"WANDB_API_KEY={MASK}",
                f"AWS_SECRET_ACCESS_KEY={MASK}",
                "LR=0.1",
                "python",
                "t.py",
            ],
        ),
        (
            ["t.py", "--db", "postgres://bob:pa55word@db.example:5432/runs"],
            ["t.py", "--db", f"postgres://bob:{MASK}@db.example:5432/runs"],
        ),
        (
            ["t.py", "ghp_0123456789abcdefghijABCDEFGHIJ", "--key", "--verbose"],
            ["t.py", MASK, "--key", "--verbose"],
        ),  # a flag after --key is no value to mask
        (
            ["t.py", "--data", "/data/imagenet/train", "--batch-size", "256", "--lr=3e-4"],
            ["t.py", "--data", "/data/imagenet/train", "--batch-size", "256", "--lr=3e-4"],
        ),
    ],
)
def test_secrets_on_the_command_line_are_masked(argv: list[str], expected: list[str]) -> None:
    assert redact_command(argv) == expected


def test_no_environment_dump_and_the_command_is_masked(tmp_path: Path) -> None:
    environment = {
        "facts": {
            "schema_version": 1,
            "environment": {
                "HF_TOKEN": "hf_leakedleakedleakedleaked",
                "CUDA_VISIBLE_DEVICES": "0,1",
            },
            "python": {"version": "3.11.9"},
            "nvml": {"driver_version": "570.124.06", "cuda_driver_version": 12080},
            "frameworks": {"tensorflow": {"version": "2.21.0"}},
        },
        "findings": NO_GPU_ENV["findings"],
    }
    page = _page(
        _run(
            tmp_path / "r.db",
            environment=environment,
            command=("python", "t.py", "--token", "tok-secret-value"),
        )
    )
    assert "hf_leaked" not in page and "CUDA_VISIBLE_DEVICES" not in page
    assert "tok-secret-value" not in page
    assert "--token &#x27;***&#x27;" in page
    for shown in ("3.11.9", "570.124.06", "12.8", "tensorflow 2.21.0", "NO_DRIVER"):
        assert shown in page, shown


def test_phase_bands_are_capped_for_runs_with_many_rounds(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=3000, devices=[H100], environment=GPU_OK_ENV)
    for index in range(12_000):  # a short evaluation every 0.25 s
        start = index * 0.25
        run.phase("train", start, start + 0.2).phase("validation", start + 0.2, start + 0.25)
    page = _page(run.close())
    phases = json.loads(_data_block(page))["timeline"]["phases"]
    assert sum(len(p["intervals"]) // 2 for p in phases) <= MAX_INTERVALS
    assert {p["name"] for p in phases} >= {"train", "validation"}


def test_an_empty_recording_still_makes_a_page(tmp_path: Path) -> None:
    recording = Run(tmp_path / "r.db", duration_s=0).close()
    page = _page(recording)
    data = json.loads(_data_block(page))["timeline"]
    assert data["gpu_lanes"] == [] and data["host_lane"] is None
    assert "No runtime findings." in page


def test_write_html_replaces_the_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("old", encoding="utf-8")
    with _run(tmp_path / "r.db") as recording:
        write_html(diagnose(recording), recording, target)
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir() if "html" in p.name] == ["report.html"]


def test_write_html_to_a_missing_folder_is_a_one_line_error(tmp_path: Path) -> None:
    with _run(tmp_path / "r.db") as recording, pytest.raises(UsageError) as caught:
        write_html(diagnose(recording), recording, tmp_path / "nowhere" / "report.html")
    message = caught.value.one_line()
    assert "cannot write the HTML report" in message and "\n" not in message


def test_spans_of_a_recording_without_gpu_samples_still_draw_phases(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=5, environment=NO_GPU_ENV)
    run.writer.put(Span("predict", SpanKind.PHASE, 1_000_000_000, 4_000_000_000))
    data = json.loads(_data_block(_page(run.close())))["timeline"]
    assert data["phases"][0] == {
        "name": "predict",
        "color": "#17a589",
        "intervals": [
            1.0,
            4.0,
        ],
        "background": False,
    }


def test_a_data_parallel_job_gets_a_rank_table_with_its_text_escaped(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=10, devices=[H100], environment=GPU_OK_ENV)
    for rank, wait in enumerate((0.01, 0.04)):
        pid = 100 + rank
        run.event(0.5, PROCESS_EVENT, "", pid=pid, ppid=1, launcher="torchrun", rank=rank,
                  world_size=2, host=HOSTILE[1])  # fmt: skip
        run.steps("train", 1, 30, 0.06 - wait, wait_s=wait, pid=pid)
    run.phase("train", 1, 2.8)
    page = _page(run.close())
    section = page[page.index('<section id="ranks">') :]
    section = section[: section.index("</section>")]
    assert "train (2 ranks)" in section
    assert section.count("<tr data-rank=") == 2
    assert '<tr data-rank="rank 1"><th scope="row">rank 1</th>' in section
    assert "40.0 ms" in section  # rank 1's wait per step
    assert "<img" not in section and "&lt;img src=x" in section
    # One process: no rank section at all.
    assert '<section id="ranks">' not in _page(_run(tmp_path / "one.db"))


def test_one_time_work_and_its_retraces_are_broken_out_under_the_phase_table(
    tmp_path: Path,
) -> None:
    run = Run(tmp_path / "r.db", duration_s=6, devices=[H100], environment=GPU_OK_ENV)
    end = run.steps("train", 1.0, 100, 0.04, pid=3)
    run.phase("train", 1.0, end)
    for index in range(10):  # ten calls of 40 ms that traced the step again for 30 ms
        run.event(
            1.5 + 0.28 * index + 0.005, "retrace", duration_ns=30_000_000, function="s", pid=3
        )
    page = _page(run.close())
    section = page[page.index('<section id="phases">') :]
    section = section[: section.index("</section>")]
    parts = "10 calls that traced or compiled the step again 300 ms"
    assert f'<td class="num" title="{parts}">300 ms</td>' in section
    assert (
        '<p class="note" id="one-time">One-time work (step and data-wait figures are of the '
        f"steady steps): &#x27;train&#x27; 300 ms ({parts})</p>"
    ) in section
    # Steady steps alone: no parts, no note.
    assert 'id="one-time"' not in _page(_run(tmp_path / "steady.db"))


def test_steps_of_tens_of_microseconds_read_in_microseconds(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=3, devices=[H100], environment=GPU_OK_ENV)
    end = run.steps("train", 1.0, 200, 0.00004)
    run.phase("train", 1.0, end)
    page = _page(run.close())
    row = page[page.index('<tr data-phase="train">') :]
    row = row[: row.index("</tr>")]
    assert row.count('<td class="num">40 µs</td>') == 2  # step p50 and p95
