"""`--fail-on CODES` of `run` and `report`: exit non-zero when a listed finding appears.

A CI pipeline lists the finding codes it will not accept (`--fail-on INPUT_BOUND,NOT_ON_GPU`) or
a severity (`error`, `warning`: that severity or worse). What counts is every runtime finding of
the report and every environment finding that concerns the job's framework (the report's own
rule: a CPU-only PyTorch installed beside a TensorFlow job does not fail the TensorFlow job).
A listed code matches at any severity, so a moderately input-bound run (an INPUT_BOUND of
severity info) fails a gate on INPUT_BOUND too.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from gpuwhy.errors import ExitCode, UsageError

SEVERITY_WORDS = ("error", "warning")
"""Keywords besides the codes: `error` = any error finding; `warning` = warning or error."""

HELP = (
    "exit with code 4 when one of these findings appears: finding codes (INPUT_BOUND, "
    "NOT_ON_GPU, ...; docs/findings.md, docs/doctor.md) or a severity: 'error', 'warning' "
    "(that severity or worse). Comma-separated, repeatable, any case"
)


def add_argument(parser: argparse.ArgumentParser) -> None:
    """Add the repeatable ``--fail-on CODES`` option to a subcommand's parser."""
    parser.add_argument("--fail-on", metavar="CODES", action="append", default=[], help=HELP)


def known_codes() -> tuple[str, ...]:
    """Every code a report can hold: the runtime rules' codes, then the environment's."""
    from gpuwhy.analysis import RUNTIME_CODES
    from gpuwhy.env import codes

    return (*RUNTIME_CODES, *(code for code in codes.ALL if code not in RUNTIME_CODES))


@dataclass(frozen=True)
class FailOn:
    """What the user listed: exact codes and severity keywords (both upper/lower-case free)."""

    codes: frozenset[str]
    severities: frozenset[str]  # Severity values: "error", "warning"

    def matched(self, diagnosis: Any) -> list[str]:
        """The codes of the findings in ``diagnosis`` that the gate fails on, in report order."""
        found: list[str] = []
        for finding in _counted_findings(diagnosis):
            listed = finding.code in self.codes or finding.severity.value in self.severities
            if listed and finding.code not in found:
                found.append(finding.code)
        return found


def parse(values: Sequence[str], command: str) -> FailOn | None:
    """The gate given by the ``--fail-on`` values, or None when none was given.

    Raises `UsageError` (exit 2) for an empty list or an unknown code, naming the valid ones.
    """
    if not values:
        return None
    items = [item.strip() for value in values for item in value.split(",")]
    items = [item for item in items if item]
    if not items:
        raise UsageError(
            f"{command}: --fail-on needs at least one finding code",
            f"e.g. --fail-on INPUT_BOUND,NOT_ON_GPU; valid: {_valid_text()}",
        )
    valid = known_codes()
    codes: set[str] = set()
    severities: set[str] = set()
    for item in items:
        if item.lower() in SEVERITY_WORDS:
            severities.add(item.lower())
        elif item.upper() in valid:
            codes.add(item.upper())
        else:
            close = difflib.get_close_matches(item.upper(), valid, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UsageError(
                f"{command}: --fail-on: unknown finding code {item!r}{hint}",
                f"valid: {_valid_text()}",
            )
    if "warning" in severities:
        severities.add("error")  # "warning" means that severity or worse
    return FailOn(frozenset(codes), frozenset(severities))


def exit_code(
    gate: FailOn | None,
    diagnosis: Any | None,
    problem: str | None,
    stream: TextIO = sys.stderr,
    *,
    job_exit_code: int | None = None,
) -> int | None:
    """Check the gate and say so on ``stream``; the exit code it asks for, or None if it passes.

    ``job_exit_code`` (run) is the command's own code: when it failed, that code wins and the
    line only names the matches. A gate that cannot be checked (the analysis failed) fails with
    `ExitCode.INTERNAL`: a gate that passes without looking would let a regression through.
    """
    if gate is None:
        return None
    job_failed = job_exit_code not in (None, 0)
    if diagnosis is None:
        _say(stream, f"--fail-on: cannot check the findings ({problem or 'no analysis'})")
        return None if job_failed else int(ExitCode.INTERNAL)
    matched = gate.matched(diagnosis)
    if not matched:
        return None
    found = ", ".join(matched)
    if job_failed:
        _say(stream, f"--fail-on: found {found} (exit code {job_exit_code}: the command's own)")
        return None
    _say(stream, f"--fail-on: found {found} (exit code {int(ExitCode.FINDINGS_MATCHED)})")
    return int(ExitCode.FINDINGS_MATCHED)


def _counted_findings(diagnosis: Any) -> Iterable[Any]:
    from gpuwhy.analysis.framework import Framework, concerns_job

    yield from diagnosis.findings
    try:
        framework = Framework(diagnosis.framework)
    except ValueError:
        framework = Framework.UNKNOWN
    for finding in diagnosis.environment_findings:
        if concerns_job(framework, finding):
            yield finding


def _valid_text() -> str:
    return ", ".join((*SEVERITY_WORDS, *known_codes()))


def _say(stream: TextIO, text: str) -> None:
    try:
        stream.write(f"gpuwhy: {text}\n")
        stream.flush()
    except (OSError, ValueError):
        pass  # the terminal went away: the exit code still carries the result
