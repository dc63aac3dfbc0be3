"""What a trial left in the job's working directory: a listing before and after `gpuwhy try`.

The trial runs skip model saves and stop before the job's end (hooks/try_fixes.py); anything
else a job writes as it goes (a log file, TensorBoard events) it still writes. gpuwhy cannot
undo that, but it says which files changed, so nothing is overwritten unseen.
"""

from __future__ import annotations

import os
from pathlib import Path

MAX_ENTRIES = 20_000
"""A listing stops after this many files: a working directory that holds a dataset is listed
in part, which is said."""

Listing = dict[str, tuple[int, int]]  # relative path -> (size bytes, mtime ns)


def listing(root: Path, *, skip: Path | None = None) -> tuple[Listing, bool]:
    """The files under `root` (not following links), and whether the listing is complete."""
    found: Listing = {}
    skip_text = str(skip.resolve()) if skip is not None else None
    for folder, folders, files in os.walk(root.resolve()):
        if skip_text is not None:
            folders[:] = [f for f in folders if os.path.join(folder, f) != skip_text]
        folders[:] = [f for f in folders if not f.startswith(".")]  # .git, .venv: not outputs
        for name in files:
            path = os.path.join(folder, name)
            try:
                stat = os.lstat(path)
            except OSError:
                continue
            found[os.path.relpath(path, root)] = (stat.st_size, stat.st_mtime_ns)
            if len(found) >= MAX_ENTRIES:
                return found, False
    return found, True


def changed(before: Listing, after: Listing) -> list[str]:
    """Files created or modified between two listings, sorted."""
    return sorted(path for path, state in after.items() if before.get(path) != state)
