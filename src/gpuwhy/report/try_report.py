"""`gpuwhy try`'s table for people and its JSON document for machines."""

from __future__ import annotations

import statistics
from typing import Any, TextIO

from gpuwhy.tryout.session import FASTER, Row, TryReport

SCHEMA_VERSION = 1


def _times(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def _measured(row: Row) -> str:
    if row.speedup is None or row.spread is None:
        return "—"
    low, high = row.spread
    return f"{row.speedup:.2f}× ({low:.2f}–{high:.2f})"


def write_text(report: TryReport, stream: TextIO, *, wrote: list[str]) -> None:
    say = stream.write
    say(f"\ngpuwhy try: {' '.join(report.command)}\n")
    if report.nothing_to_gain is not None:
        say(f"nothing to gain: {report.nothing_to_gain}\n")
        _wrote(say, wrote)
        return
    base = statistics.median(report.baseline_per_batch_s) if report.baseline_per_batch_s else None
    budget = report.budget
    limit = f" or {budget.time_s:g} s" if budget.time_s else ""
    say(
        f"phase {report.phase!r}: {budget.steps} batches{limit} per run after {budget.skip} "
        f"of warm-up, {report.rounds} round{'s' if report.rounds != 1 else ''} alternated"
        + (f"; as written {base * 1000:.1f} ms per batch (median)\n" if base else "\n")
    )
    if report.ceiling is not None:
        say(f"its input wait gone entirely would make it {_times(report.ceiling)} faster\n")
    rows = [("fix", "estimated", "measured (lowest–highest)", "verdict")]
    for row in report.rows:
        name = f"combined: {row.fix.name}" if row.combined else row.fix.name
        verdict = row.verdict if row.problem is None else f"failed: {row.problem}"
        rows.append((name, _times(row.estimate), _measured(row), verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for cells in rows:
        padded = [cell.ljust(width) for cell, width in zip(cells[:3], widths, strict=False)]
        say("  " + "  ".join([*padded, cells[3]]) + "\n")
    best = report.best
    if best is None:
        say("\nnothing to gain: no fix was measurably faster than the job as written\n")
    else:
        estimate = f", gpuwhy estimated {_times(best.estimate)}" if best.estimate else ""
        say(f"\nthe one change to make ({_times(best.speedup)} measured{estimate}):\n")
        for line in best.fix.changes(report.seen):
            say(f"  {line}\n")
        for flag in best.fix.opt_in():
            say(f"  (allowed by {flag}: it may change the training's results)\n")
    if report.saves_skipped:
        say(
            f"skipped {report.saves_skipped} model saves per run of the job as written "
            "(a short run must not keep one)\n"
        )
    _wrote(say, wrote)


def _wrote(say: Any, wrote: list[str]) -> None:
    if wrote:
        shown = ", ".join(wrote[:8]) + (f" and {len(wrote) - 8} more" if len(wrote) > 8 else "")
        say(f"note: the job wrote to its working directory during the runs: {shown}\n")


def to_dict(report: TryReport, *, wrote: list[str]) -> dict[str, Any]:
    best = report.best
    return {
        "schema_version": SCHEMA_VERSION,
        "command": report.command,
        "phase": report.phase,
        "budget": {
            "steps": report.budget.steps,
            "skip": report.budget.skip,
            "time_s": report.budget.time_s,
        },
        "rounds": report.rounds,
        "baseline_per_batch_s": report.baseline_per_batch_s,
        "ceiling_speedup": report.ceiling,
        "findings": [f.code for f in report.findings],
        "fixes": [_row(row, report) for row in report.rows],
        "best": None if best is None else best.fix.name,
        "nothing_to_gain": report.nothing_to_gain
        or (None if best is not None or not report.rows else "no fix was measurably faster"),
        "saves_skipped": report.saves_skipped,
        "wrote": wrote,
    }


def _row(row: Row, report: TryReport) -> dict[str, Any]:
    return {
        "name": row.fix.name,
        "settings": dict(row.fix.settings),
        "addresses": row.fix.addresses,
        "combined": row.combined,
        "estimated_speedup": row.estimate,
        "measured_speedup": row.speedup,
        "spread": list(row.spread) if row.spread else None,
        "ratios": row.ratios,
        "noise": row.noise,
        "per_batch_s": row.per_batch_s,
        "verdict": row.verdict,
        "gain": row.verdict == FASTER,
        "problem": row.problem,
        "changes": row.fix.changes(report.seen),
        "opt_in": row.fix.opt_in(),
    }
