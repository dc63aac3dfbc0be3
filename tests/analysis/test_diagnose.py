"""diagnose() end to end on recordings written and read through the real recording package."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from constructed import GPU_OK_ENV, H100, NO_GPU_ENV, Run

from gpuwhy.analysis import diagnose
from gpuwhy.analysis.framework import Framework, detect, pick
from gpuwhy.model import Event, Severity, Span, SpanKind
from gpuwhy.recording import Recording, RecordingWriter

FACTS = Path(__file__).resolve().parents[1] / "data" / "facts"


def test_environment_defaults_to_the_recorded_one_and_can_be_overridden(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=4, environment=NO_GPU_ENV)
    run.phase("train", 1, 3)
    with run.close() as recording:
        recorded = diagnose(recording)
        overridden = diagnose(recording, environment=GPU_OK_ENV)
    assert [f.code for f in recorded.environment_findings] == ["NO_DRIVER"]
    assert recorded.worst_severity is Severity.ERROR
    assert overridden.environment_findings == []


def test_facts_without_findings_are_evaluated_by_the_doctors_rules(tmp_path: Path) -> None:
    facts = json.loads((FACTS / "captured-linux-docker-no-driver.json").read_text())
    run = Run(tmp_path / "r.db", duration_s=4)
    with run.close() as recording:
        diagnosis = diagnose(recording, environment={"facts": facts})
    assert "NO_DRIVER" in [f.code for f in diagnosis.environment_findings]


def test_run_window_falls_back_to_the_recorded_time_range(tmp_path: Path) -> None:
    # A recording cut short (no end_ns, not closed by `run`): analyse what is there.
    writer = RecordingWriter(tmp_path / "r.db")
    writer.put(Span("train", SpanKind.PHASE, 2_000_000_000, 5_000_000_000))
    writer.put(Span("train", SpanKind.STEP, 2_000_000_000, 5_000_000_000, step=0, steps=30))
    writer.close()
    with Recording.open(tmp_path / "r.db") as recording:
        diagnosis = diagnose(recording)
    assert diagnosis.duration_s == pytest.approx(3.0)
    assert diagnosis.phases["train"].share == pytest.approx(1.0)
    assert diagnosis.phases["train"].step_time_p50_s == pytest.approx(0.1)
    assert diagnosis.command == [] and diagnosis.exit_code is None


def test_empty_recording_gives_an_empty_healthy_diagnosis(tmp_path: Path) -> None:
    RecordingWriter(tmp_path / "r.db").close()
    with Recording.open(tmp_path / "r.db") as recording:
        diagnosis = diagnose(recording)
    assert diagnosis.duration_s == 0.0
    assert diagnosis.findings == [] and list(diagnosis.phases) == ["other"]


def test_devices_report_use_share_and_link(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=4, devices=[H100], environment=GPU_OK_ENV)
    end = run.steps("train", 1, 20, 0.1)
    run.phase("train", 1, end)
    run.gpu(
        0,
        1,
        end,
        util_gpu_pct=80,
        job_sm_pct=60,
        job_memory_bytes=2**30,
        memory_used_bytes=3 * 2**30,
    )
    with run.close() as recording:
        (gpu,) = diagnose(recording).devices
    assert gpu.util_mean_pct == pytest.approx(80)
    assert gpu.job_share == pytest.approx(0.75)
    assert gpu.job_seen is True
    assert gpu.memory_used_max_bytes == 3 * 2**30
    assert gpu.link_bytes_per_s == pytest.approx(63.0e9, rel=0.01)  # gen5 x16


def test_framework_comes_from_hook_events_then_facts() -> None:
    keras_torch = [Event(0, "hook", "keras fit", {"framework": "keras", "backend": "torch"})]
    assert detect(keras_torch) is Framework.KERAS_TORCH
    assert detect([Event(0, "hook", "torch DataLoader patched")]) is Framework.TORCH
    assert detect([Event(0, "hook", "tf.data iteration")]) is Framework.TENSORFLOW
    assert detect([], {"frameworks": {"torch": {"version": "2.13"}}}) is Framework.TORCH
    ambiguous = {"frameworks": {"torch": {"v": 1}, "tensorflow": {"v": 2}}}
    assert detect([], ambiguous) is Framework.UNKNOWN
    fixes = {"torch": "T", "keras": "K", "tensorflow": "TF", "default": "D"}
    assert pick(Framework.KERAS_TORCH, fixes) == "K"
    assert pick(Framework.LIGHTNING, fixes) == "T"
    assert pick(Framework.TENSORFLOW, fixes) == "TF"
    assert pick(Framework.JAX, fixes) == "D"


def test_findings_are_sorted_most_valuable_first(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=20, environment=NO_GPU_ENV)
    end = run.steps("train", 1, 100, 0.05, wait_s=0.02)  # 1 .. 8: 29 % waiting
    run.phase("train", 1, end)
    run.phase("validation", end, 19)  # 11 s of validation
    with run.close() as recording:
        diagnosis = diagnose(recording)
    codes = [f.code for f in diagnosis.findings]
    assert codes == ["SLOW_VALIDATION", "INPUT_BOUND"]
    assert diagnosis.findings[0].speedup > diagnosis.findings[1].speedup  # type: ignore[operator]


def test_untimed_input_makes_no_input_bound_claim(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=4, environment=NO_GPU_ENV)
    end = run.steps("train", 1, 20, 0.1, timed=False)
    run.phase("train", 1, end)
    run.event(
        1.5,
        "data_wait_unavailable",
        "data wait of 'train' unknown: distributed",
        phase="train",
        reason="a tf.distribute strategy is in scope",
    )
    with run.close() as recording:
        diagnosis = diagnose(recording)
    assert diagnosis.phases["train"].data_wait_fraction is None
    assert diagnosis.findings == []


def test_framework_from_the_hooks_instrumentation_events() -> None:
    def hooked(*modules: str) -> list[Event]:
        return [
            Event(0, "hooks", f"instrumented {m}", {"key": f"hooked:{m}", "module": m})
            for m in modules
        ]

    def keras_loop(backend: str) -> list[Event]:
        data = {"key": "keras.loop", "framework": "keras", "backend": backend}
        return [Event(0, "hooks", "Keras loop ran", data)]

    assert detect(hooked("tensorflow", "keras") + keras_loop("tensorflow")) is Framework.KERAS_TF
    assert detect(hooked("torch", "keras") + keras_loop("torch")) is Framework.KERAS_TORCH
    assert detect(hooked("jax", "tensorflow", "keras") + keras_loop("jax")) is Framework.KERAS_JAX
    # Keras imported (TensorFlow imports it; a GradientTape loop builds its model with it) but
    # no Keras loop: the job is not a Keras job.
    assert detect(hooked("tensorflow", "keras")) is Framework.TENSORFLOW
    assert detect(hooked("torch", "keras")) is Framework.TORCH
    assert detect(hooked("jax")) is Framework.JAX
    assert detect(hooked("tensorflow")) is Framework.TENSORFLOW
    assert detect(hooked("torch")) is Framework.TORCH
    assert detect(hooked("torch", "lightning")) is Framework.LIGHTNING


def test_slow_validation_keeps_one_round_and_counts_its_teardown(tmp_path: Path) -> None:
    run = Run(tmp_path / "r.db", duration_s=20, environment=NO_GPU_ENV)
    t = 1.0
    for epoch in range(3):
        end = run.steps("train", t, 10, 0.05)
        run.phase("train", t, end)
        first = 2.0 if epoch == 0 else 1.5  # the first round compiles
        run.phase("validation", end, end + first)
        t = end + first + 0.5  # 0.5 s of teardown before training resumes
    with run.close() as recording:
        diagnosis = diagnose(recording)
    finding = diagnosis.findings[0]
    assert finding.code == "SLOW_VALIDATION"
    assert finding.evidence["validation_round_s"] == [2.0, 1.5, 1.5]
    assert finding.evidence["validation_resume_s"] == [0.5, 0.5, 0.0]
    # Kept: the longest round (2.0 s); saved 1.5 + 1.5 + 2 x 0.5 = 4.0 s of 20.
    assert finding.speedup == pytest.approx(20 / 16, rel=1e-3)


def test_every_runtime_code_is_documented() -> None:
    from gpuwhy.analysis import RUNTIME_CODES

    findings = (Path(__file__).resolve().parents[2] / "docs" / "findings.md").read_text()
    for code in RUNTIME_CODES:
        assert f"\n## {code}\n" in findings, code
        assert f"[{code}](#{code.lower()})" in findings, code  # and linked from the index


def test_a_short_validation_reads_in_milliseconds_in_the_title(tmp_path: Path) -> None:
    # 29 ms of validation against 105 ms of training: "0.0 s vs 0.1 s" would say nothing.
    run = Run(tmp_path / "r.db", duration_s=2, environment=NO_GPU_ENV)
    end = run.steps("train", 1.0, 15, 0.007)
    run.phase("train", 1.0, end)
    run.phase("validation", end, end + 0.029)
    with run.close() as recording:
        finding = diagnose(recording).findings[0]
    assert finding.code == "SLOW_VALIDATION"
    assert finding.title.endswith("(29.0 ms vs 105 ms of training)"), finding.title
