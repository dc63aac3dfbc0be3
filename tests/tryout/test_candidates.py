"""Which fixes `gpuwhy try` picks from a diagnosis and what its hooks saw; `--fix` parsing; the
combination of the winners; each fix's code change and estimate."""

from __future__ import annotations

import pytest

from gpuwhy.errors import UsageError
from gpuwhy.model import Finding, Severity
from gpuwhy.tryout.candidates import Fix, Seen, candidates, combine, parse_fix
from gpuwhy.tryout.estimates import estimate


def finding(code: str, **evidence: object) -> Finding:
    return Finding(code, Severity.WARNING, code, dict(evidence), "fix it")


INPUT = finding("INPUT_BOUND", data_wait_fraction=0.75, phase_speedup=4.0)
LOADER = Seen(
    counts={"torch.DataLoader": 1},
    sites={"torch.DataLoader": "train.py:42"},
    values={"torch.num_workers": 0, "torch.pin_memory": False},
)
TF_MAP = Seen(
    counts={"tf.map_sequential": 1, "tf.no_prefetch": 1, "tf.prefetch_injected": 1},
    sites={"tf.map_sequential": "train.py:10", "tf.no_prefetch": "train.py:30"},
)


def names(fixes: list[Fix]) -> list[str]:
    return [fix.name for fix in fixes]


def test_an_input_bound_loader_gets_worker_counts_up_to_the_cores() -> None:
    assert names(candidates([INPUT], LOADER, cuda=False, cpu_count=2)) == [
        "torch.num_workers=2",
        "torch.num_workers=4",
    ]
    assert names(candidates([INPUT], LOADER, cuda=False, cpu_count=16)) == [
        "torch.num_workers=2",
        "torch.num_workers=4",
        "torch.num_workers=8",
    ]


def test_pinned_memory_is_tried_only_with_a_gpu_and_only_if_not_pinned() -> None:
    assert "torch.pin_memory" in names(candidates([INPUT], LOADER, cuda=True, cpu_count=2))
    pinned = Seen(LOADER.counts, LOADER.sites, {"torch.pin_memory": True})
    assert "torch.pin_memory" not in names(candidates([INPUT], pinned, cuda=True, cpu_count=2))


def test_a_loader_with_workers_already_gets_only_more_of_them() -> None:
    seen = Seen(LOADER.counts, LOADER.sites, {"torch.num_workers": 4})
    assert names(candidates([INPUT], seen, cuda=False, cpu_count=8)) == ["torch.num_workers=8"]


def test_an_iterable_dataset_gets_no_workers() -> None:
    seen = Seen({"torch.DataLoader": 1, "torch.IterableDataset": 1})
    assert candidates([INPUT], seen, cuda=False, cpu_count=8) == []


def test_tfdata_fixes_follow_what_the_pipeline_lacks() -> None:
    assert names(candidates([INPUT], TF_MAP, cuda=False)) == ["tf.parallel_map", "tf.prefetch"]
    reorder = candidates([INPUT], TF_MAP, cuda=False, allowed=["--allow-reorder"])
    assert "tf.deterministic=False, tf.parallel_map" in names(reorder)


def test_host_bound_keras_gets_steps_per_execution() -> None:
    seen = Seen({"keras.compile": 1}, values={"keras.steps_per_execution": 1})
    host = finding("HOST_BOUND")
    assert names(candidates([host], seen, cuda=True)) == [
        "keras.steps_per_execution=4",
        "keras.steps_per_execution=16",
    ]
    assert candidates([host], Seen(), cuda=True) == []  # no Keras compile seen


def test_a_healthy_job_gets_no_candidate() -> None:
    assert candidates([finding("GPU_BOUND")], LOADER, cuda=True) == []
    assert candidates([], TF_MAP, cuda=True) == []


def test_fix_flags_parse_and_refuse_clearly() -> None:
    fix = parse_fix("torch.num_workers=6, torch.pin_memory", [])
    assert dict(fix.settings) == {"torch.num_workers": 6, "torch.pin_memory": True}
    assert dict(parse_fix("keras.steps_per_execution", []).settings) == {
        "keras.steps_per_execution": 8
    }
    with pytest.raises(UsageError, match="unknown setting"):
        parse_fix("torch.workers=4", [])
    with pytest.raises(UsageError, match="bad value"):
        parse_fix("torch.num_workers=0", [])
    with pytest.raises(UsageError, match="may change the training"):
        parse_fix("tf.deterministic=false", [])
    assert dict(parse_fix("tf.deterministic=false", ["--allow-reorder"]).settings) == {
        "tf.deterministic": False
    }
    assert parse_fix("tf.deterministic=false", ["--allow-reorder"]).opt_in() == ["--allow-reorder"]


def test_the_combination_keeps_the_best_value_and_workers_between_epochs() -> None:
    best, other = Fix({"torch.num_workers": 4}), Fix({"torch.num_workers": 2})
    pinned = Fix({"torch.pin_memory": True})
    combined = combine([best, other, pinned])
    assert combined is not None
    assert dict(combined.settings) == {
        "torch.num_workers": 4,
        "torch.pin_memory": True,
        "torch.persistent_workers": True,
    }
    assert combine([]) is None
    assert combine([Fix({"tf.parallel_map": True})]) is None  # nothing to add: itself


def test_the_code_change_names_the_call_and_where_it_is() -> None:
    fix = Fix({"torch.num_workers": 4, "torch.persistent_workers": True})
    assert fix.changes(LOADER) == [
        "train.py:42: DataLoader(..., num_workers=4, persistent_workers=True)"
    ]
    both = Fix({"tf.parallel_map": True, "tf.prefetch": True})
    assert both.changes(TF_MAP) == [
        "train.py:10: dataset.map(fn, num_parallel_calls=tf.data.AUTOTUNE)",
        "train.py:30: dataset = dataset.prefetch(tf.data.AUTOTUNE)  # last in the pipeline",
    ]


def test_estimates_follow_the_wait_share_and_the_loaders_at_once() -> None:
    # a wait of 75 % made between steps: 4 workers make the input 0.75 / 4 < 0.25, so the
    # rest bounds it: 4x
    assert estimate({"torch.num_workers": 4}, [INPUT], LOADER) == 4.0
    assert estimate({"torch.num_workers": 2}, [INPUT], LOADER) == pytest.approx(2.67, abs=0.01)
    # tf.data appends a prefetch: the input already overlapped the steps and took all of each
    # step (1), so two calls at once make a batch in half a step: 2x
    assert estimate({"tf.parallel_map": True}, [INPUT], TF_MAP, cpu_count=2) == 2.0
    assert estimate({"tf.prefetch": True}, [INPUT], TF_MAP) == 1.0  # tf.data adds one itself
    no_injection = Seen({"tf.map_sequential": 1, "tf.no_prefetch": 1})
    assert estimate({"tf.prefetch": True}, [INPUT], no_injection) == pytest.approx(1.33, abs=0.01)
    assert estimate({"tf.parallel_map": True}, [INPUT], no_injection, cpu_count=2) == 2.67
    with_workers = Seen(LOADER.counts, LOADER.sites, {"torch.num_workers": 2})
    assert estimate({"torch.num_workers": 4}, [INPUT], with_workers) == 2.0  # 1 / (1 / 2)
    assert estimate({"torch.pin_memory": True}, [INPUT], LOADER) is None
    assert estimate({"torch.num_workers": 4}, [], LOADER) is None  # no wait measured
