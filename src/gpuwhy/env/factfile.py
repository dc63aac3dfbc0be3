"""Facts as a file: `gpuwhy doctor --save FILE` writes one, `--from FILE` re-runs the rules on it.

A facts document is a JSON object with ``"kind": "gpuwhy.facts"`` and ``schema_version``. The
output of ``doctor --json`` (``{"schema_version", "facts", "findings"}``) is accepted too, so a
pasted report can be re-evaluated.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from gpuwhy.errors import InputFileError

FACTS_KIND = "gpuwhy.facts"
FACTS_SCHEMA_VERSION = 1
# Sections every facts document has; each is a JSON object.
SECTIONS = ("system", "environment", "nvml", "python", "distributions", "libraries", "frameworks")


def validate_facts(document: Any, source: str) -> dict[str, Any]:
    """The facts in `document`, or InputFileError saying why they are not facts gpuwhy can read."""
    if isinstance(document, dict) and isinstance(document.get("facts"), dict):
        document = document["facts"]  # the output of `gpuwhy doctor --json`
    if not isinstance(document, dict) or document.get("kind") != FACTS_KIND:
        raise InputFileError(
            f"{source} is not a gpuwhy facts file",
            "make one with 'gpuwhy doctor --save FILE'",
        )
    version = document.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputFileError(f"{source} has no valid schema_version", "save the facts again")
    if version > FACTS_SCHEMA_VERSION:
        raise InputFileError(
            f"{source} has facts schema {version}, newer than this gpuwhy reads"
            f" ({FACTS_SCHEMA_VERSION})",
            "upgrade gpuwhy: pip install -U gpuwhy",
        )
    broken = [name for name in SECTIONS if not isinstance(document.get(name), dict)]
    if broken:
        raise InputFileError(
            f"{source} is an incomplete facts file (missing or malformed: {', '.join(broken)})",
            "save the facts again with 'gpuwhy doctor --save FILE'",
        )
    return document


def load_facts(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a facts file; InputFileError (one line, with a fix) for any bad file."""
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise InputFileError(f"{source}: no such file", "check the path given to --from") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputFileError(f"cannot read {source}: {error}", "check the file") from error
    try:
        document = json.loads(text)
    except ValueError as error:
        raise InputFileError(
            f"{source} is not valid JSON ({error})",
            "save the facts again: gpuwhy doctor --save FILE",
        ) from error
    return validate_facts(document, source)


def save_facts(facts: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Write facts as JSON; InputFileError if the file cannot be written."""
    target = os.fspath(path)
    try:
        with open(target, "w", encoding="utf-8") as handle:
            json.dump(facts, handle, indent=1)
            handle.write("\n")
    except OSError as error:
        raise InputFileError(
            f"cannot write {target}: {error.strerror or error}", "choose a writable path"
        ) from error
