"""Framework probe results are reused only while nothing they depend on has changed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gpuwhy.env import collect_facts
from gpuwhy.env.probe_cache import ProbeCache, default_cache_dir, probe_key
from support import framework_env

INTERPRETER = {"executable": "/venv/bin/python", "version": "3.11.7", "prefix": "/venv"}
DISTRIBUTIONS = {"torch": {"version": "2.13.0+cpu"}}
NVML = {"status": "library_not_found"}
OK = {"torch": {"probe": "ok", "version": "2.13.0+cpu", "cuda": None}}


@pytest.mark.slow
def test_a_second_collection_reuses_the_framework_probes(tmp_path: Path) -> None:
    python = str(framework_env("torch-cpu"))
    cache = ProbeCache(tmp_path)
    first = collect_facts(python, cache=cache)
    start = time.monotonic()
    second = collect_facts(python, cache=cache)
    reused_s = time.monotonic() - start
    assert first["collected"]["frameworks_cached"] is False
    assert second["collected"]["frameworks_cached"] is True
    assert second["frameworks"] == first["frameworks"]
    assert reused_s < first["frameworks"]["torch"]["elapsed_s"]
    fresh = collect_facts(python, cache=cache, reuse_cached=False)
    assert fresh["collected"]["frameworks_cached"] is False


@pytest.mark.slow
def test_a_changed_environment_variable_is_probed_afresh(tmp_path: Path) -> None:
    python = str(framework_env("torch-cpu"))
    cache = ProbeCache(tmp_path)
    collect_facts(python, cache=cache, environ={"PATH": "/usr/bin"})
    hidden = collect_facts(
        python, cache=cache, environ={"PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "-1"}
    )
    assert hidden["collected"]["frameworks_cached"] is False


@pytest.mark.parametrize(
    "change",
    [
        {"distributions": {"torch": {"version": "2.14.0"}}},
        {"nvml": {"status": "ok", "driver_version": "580.65.06"}},
        {"environment": {"CUDA_VISIBLE_DEVICES": ""}},
        {"interpreter": {**INTERPRETER, "executable": "/other/bin/python"}},
    ],
)
def test_the_key_covers_what_a_probe_depends_on(change: dict[str, object]) -> None:
    parts: dict[str, object] = {
        "interpreter": INTERPRETER,
        "distributions": DISTRIBUTIONS,
        "nvml": NVML,
        "environment": {},
    }
    base = probe_key(**parts)  # type: ignore[arg-type]
    assert probe_key(**{**parts, **change}) != base  # type: ignore[arg-type]


def test_only_complete_results_are_stored_and_stale_or_corrupt_ones_ignored(tmp_path: Path) -> None:
    cache = ProbeCache(tmp_path, max_age_s=60)
    assert cache.put("partial", {"torch": {"probe": "timed_out"}}) is False
    assert cache.get("partial") is None
    assert cache.put("k", OK, now=1000.0) is True
    assert cache.get("k", now=1030.0) == OK
    assert cache.get("k", now=1061.0) is None  # stale
    (tmp_path / "frameworks-bad.json").write_text("{not json")
    assert cache.get("bad") is None
    (tmp_path / "frameworks-odd.json").write_text(json.dumps({"frameworks": []}))
    assert cache.get("odd") is None


def test_an_unwritable_cache_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert ProbeCache(blocker / "sub").put("k", OK) is False


def test_cache_dir_follows_the_documented_variables() -> None:
    assert default_cache_dir({"GPUWHY_CACHE_DIR": "/c"}) == Path("/c")
    assert default_cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/gpuwhy")
