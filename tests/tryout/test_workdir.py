"""The listing `gpuwhy try` takes of the job's working directory, to say what the job wrote."""

from __future__ import annotations

import os
from pathlib import Path

from gpuwhy.tryout import workdir


def test_created_and_modified_files_are_found_and_the_scratch_folder_is_not(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.csv").write_text("1,2\n")
    (tmp_path / "model.pt").write_bytes(b"old")
    (tmp_path / ".git").mkdir()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    before, complete = workdir.listing(tmp_path, skip=scratch)
    assert complete and set(before) == {os.path.join("data", "train.csv"), "model.pt"}
    (tmp_path / "log.txt").write_text("started\n")
    (tmp_path / "model.pt").write_bytes(b"newer")
    (scratch / "run001.log").write_text("ignored")
    (tmp_path / ".git" / "index").write_text("ignored")
    after, _ = workdir.listing(tmp_path, skip=scratch)
    assert workdir.changed(before, after) == ["log.txt", "model.pt"]


def test_a_huge_folder_is_listed_in_part_and_says_so(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(workdir, "MAX_ENTRIES", 3)
    for index in range(5):
        (tmp_path / f"f{index}").write_text("x")
    found, complete = workdir.listing(tmp_path)
    assert len(found) == 3 and not complete
