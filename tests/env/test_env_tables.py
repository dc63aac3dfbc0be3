"""The compatibility tables: rows as NVIDIA and TensorFlow publish them, and the lookups."""

from __future__ import annotations

import pytest

from gpuwhy.env.tables import (
    cuda_from_driver_int,
    driver_for_cuda,
    family_minimum_driver,
    load_table,
    parse_version,
    tensorflow_build,
)


@pytest.mark.parametrize("name", ["cuda_drivers.json", "frameworks.json"])
def test_every_table_names_its_sources(name: str) -> None:
    table = load_table(name)
    sources = table.get("sources") or [
        s for part in table.values() if isinstance(part, dict) for s in part.get("sources", [])
    ]
    assert sources and all("http" in s or "whl" in s or "METADATA" in s for s in sources)


def test_driver_rows_are_newest_first_and_parse() -> None:
    rows = load_table("cuda_drivers.json")["toolkits"]
    versions = [parse_version(r["cuda"]) for r in rows]
    assert versions == sorted(versions, reverse=True)
    assert all(len(v) == 3 for v in versions)
    assert all(parse_version(r["linux"]) for r in rows)


@pytest.mark.parametrize(
    ("cuda", "os_key", "driver", "exact", "row"),
    [
        ("12.5.1", "linux", "555.42.06", True, "12.5.1"),  # TensorFlow 2.21.0's build
        ("12.5", "linux", "555.42.02", True, "12.5.0"),
        ("12.8", "linux", "570.26", True, "12.8.0"),  # torch +cu128
        ("12.6.2", "linux", "560.35.03", True, "12.6.1"),  # "12.6 Update 1/2" share a row
        ("12.5.1", "windows", "555.85", True, "12.5.1"),
        ("13.0", "windows", None, True, "13.0.0"),  # no Windows driver bundled from 13.0
        ("13.2", "linux", "590.44.01", False, "13.1.0"),  # not in the table: a lower bound
        ("11.2", "linux", "460.27.03", True, "11.2.0"),
    ],
)
def test_minimum_driver_for_a_cuda_release(
    cuda: str, os_key: str, driver: str | None, exact: bool, row: str
) -> None:
    need = driver_for_cuda(cuda, os_key)
    assert (need.driver, need.exact, need.source_cuda) == (driver, exact, row)


def test_a_cuda_older_than_the_table_has_no_row() -> None:
    assert driver_for_cuda("10.2", "linux").driver is None


def test_family_minimums_of_minor_version_compatibility() -> None:
    assert family_minimum_driver(13, "linux") == "580"
    assert family_minimum_driver(12, "linux") == "525"
    assert family_minimum_driver(11, "linux") == "450.80.02"
    assert family_minimum_driver(10, "linux") is None


def test_versions_and_cuda_integers() -> None:
    assert parse_version("2.13.0+cpu") == (2, 13, 0)
    assert parse_version("535.104.05") == (535, 104, 5)
    assert parse_version("2.16.0rc0") == (2, 16, 0)
    assert parse_version(None) == ()
    assert cuda_from_driver_int(12080) == (12, 8)
    assert cuda_from_driver_int(13020) == (13, 2)


def test_tensorflow_build_table() -> None:
    assert tensorflow_build("2.21.0") == {
        "version": "2.21",
        "python": "3.10-3.13",
        "cuda": "12.5",
        "cudnn": "9.3",
    }
    assert (tensorflow_build("2.15.1") or {})["cuda"] == "12.2"
    assert tensorflow_build("1.15.0") is None
