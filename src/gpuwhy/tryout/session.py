"""`gpuwhy try` from start to verdict: a baseline run, the candidates, alternated rounds, the best.

1. A first run as written (cold: its start-up fills caches the others reuse) is diagnosed; its
   findings and what its hooks saw choose the candidates (candidates.py).
2. Each round runs the job as written and once per candidate, in reverse order every other
   round, so that a machine growing busier or cooler weighs on both sides alike. A candidate's
   speed-up in a round is the as-written time per batch over its own; its measured speed-up is
   the median over rounds, and the spread is the rounds' lowest and highest.
3. The candidates that gained are combined, and the combination is measured the same way.

A fix counts as a gain only when its median speed-up reaches `MIN_GAIN` and its slowest round
still beats the job as written by more than either side varies from round to round (the job as
written's runs' highest time over their lowest, or the fix's own): a lean the size of the noise is
"no measurable change", whichever way it goes.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuwhy.analysis.diagnose import diagnose
from gpuwhy.errors import ExitCode, GpuwhyError
from gpuwhy.model import Finding
from gpuwhy.recording.reader import Recording
from gpuwhy.tryout.candidates import HOST_CODES, INPUT_CODES, Fix, Seen, candidates, combine
from gpuwhy.tryout.estimates import estimate
from gpuwhy.tryout.trial import Budget, TrialResult, run_trial

MIN_GAIN = 1.05
"""5 %: below it a change of the step time is not worth a code change. XProf calls a job whose
input wait is under 5 % of the step time not input-bound (references.md#xprof-input-pipeline): the
same line, seen from the fix's side."""

MIN_BATCHES = 10
"""A run that measured fewer batches after its warm-up gives no median worth the name."""


class CannotTryError(GpuwhyError):
    """The job cannot be tried: it ran no steps, failed as written, or no fix applies."""

    exit_code = ExitCode.CANNOT_TRY


FASTER, SLOWER, NO_CHANGE, FAILED, NOT_APPLIED = (
    "faster",
    "slower",
    "no measurable change",
    "failed",
    "did not apply",
)


@dataclass
class Row:
    """One candidate, measured."""

    fix: Fix
    estimate: float | None  # gpuwhy's estimate of the phase's speed-up (estimates.py)
    per_batch_s: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)  # per round: as written / with the fix
    problem: str | None = None
    applied: bool = False
    combined: bool = False
    baseline_per_batch_s: list[float] = field(default_factory=list)  # as written, same rounds

    @property
    def speedup(self) -> float | None:
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def noise(self) -> float:
        """How much either side varied between its own runs, the larger: highest / lowest - 1."""
        return max(_spread(self.baseline_per_batch_s), _spread(self.per_batch_s))

    @property
    def spread(self) -> tuple[float, float] | None:
        return (min(self.ratios), max(self.ratios)) if self.ratios else None

    @property
    def verdict(self) -> str:
        if self.problem is not None:
            return FAILED
        if not self.applied:
            return NOT_APPLIED
        speedup, spread = self.speedup, self.spread
        if speedup is None or spread is None:
            return FAILED
        if speedup >= MIN_GAIN and spread[0] > 1.0 + self.noise:
            return FASTER
        if speedup <= 1 / MIN_GAIN and spread[1] < 1.0 / (1.0 + self.noise):
            return SLOWER
        return NO_CHANGE


@dataclass
class TryReport:
    command: list[str]
    phase: str | None
    budget: Budget
    rounds: int
    baseline_per_batch_s: list[float]
    findings: list[Finding]
    seen: Seen
    rows: list[Row] = field(default_factory=list)
    nothing_to_gain: str | None = None  # why nothing was tried
    ceiling: float | None = None  # the INPUT_BOUND estimate: the phase with its wait gone
    saves_skipped: int = 0  # model saves skipped in a run of the job as written (the most)

    @property
    def best(self) -> Row | None:
        """The fastest fix; a simpler one (fewer settings) where it is within the noise of it."""
        winners = sorted(
            (row for row in self.rows if row.verdict == FASTER),
            key=lambda row: -(row.speedup or 0.0),
        )
        if not winners:
            return None
        best = winners[0]
        top = best.speedup or 0.0
        for row in winners[1:]:
            simpler = len(row.fix.settings) < len(best.fix.settings)
            if simpler and (row.speedup or 0.0) * (1.0 + max(row.noise, best.noise)) >= top:
                best = row
        return best


Progress = Callable[[str], None]


@dataclass
class TrySession:
    command: Sequence[str]
    budget: Budget
    rounds: int
    folder: Path
    allowed: Sequence[str] = ()
    forced: Sequence[Fix] = ()
    environ: Mapping[str, str] | None = None
    progress: Progress = lambda _: None
    _runs: int = 0

    def run(self) -> TryReport:
        self.progress("run 1: the job as written (diagnosis)")
        first = self._trial({}, phase=None)
        if first.per_batch_s is None:
            raise CannotTryError(
                f"try: the job as written measured nothing: {first.problem}",
                "check that it trains under `gpuwhy run` (steps are needed; docs/try.md)",
            )
        findings, cuda = self._diagnose(first)
        seen = Seen.from_event(first.seen)
        report = TryReport(
            list(self.command), first.phase, self.budget, self.rounds, [], findings, seen
        )
        fixes = list(self.forced) or candidates(findings, seen, cuda=cuda, allowed=self.allowed)
        if not fixes:
            addressable = {f.code for f in findings} & (INPUT_CODES | HOST_CODES)
            if addressable:
                raise CannotTryError(f"try: {_unfixable(sorted(addressable), seen)}")
            report.nothing_to_gain = _nothing_reason(findings)
            return report
        report.ceiling = next((_phase_estimate(f) for f in findings if f.code in INPUT_CODES), None)
        rows = [Row(fix, estimate(fix.settings, findings, seen)) for fix in fixes]
        self._measure(report, rows, first.phase)
        winners = sorted(
            (row for row in rows if row.verdict == FASTER),
            key=lambda row: -(row.speedup or 0.0),
        )
        combined = combine([row.fix for row in winners])
        if combined is not None and not self.forced:
            row = Row(combined, estimate(combined.settings, findings, seen), combined=True)
            self._measure(report, [row], first.phase)
        return report

    def _measure(self, report: TryReport, rows: list[Row], phase: str | None) -> None:
        report.rows.extend(rows)
        for round_index in range(self.rounds):
            order: list[Row | None] = [None, *rows]  # None: the job as written
            if round_index % 2:
                order.reverse()
            results: dict[int, TrialResult] = {}
            for item in order:
                settings = {} if item is None else dict(item.fix.settings)
                label = "as written" if item is None else item.fix.name
                self.progress(f"round {round_index + 1}/{self.rounds}: {label}")
                results[id(item)] = self._trial(settings, phase=phase)
            base = results[id(None)]
            if base.per_batch_s is None:
                raise CannotTryError(
                    f"try: the job as written failed in round {round_index + 1}: {base.problem}",
                    "a job that does not run the same way twice cannot be compared (docs/try.md)",
                )
            report.baseline_per_batch_s.append(base.per_batch_s)
            skipped = int(base.seen.get("seen", {}).get("saves_skipped", 0))
            report.saves_skipped = max(report.saves_skipped, skipped)
            for row in rows:
                result = results[id(row)]
                row.applied |= bool(set(row.fix.settings) & set(result.seen.get("applied", {})))
                if result.per_batch_s is None:
                    row.problem = row.problem or result.problem
                    continue
                # A larger batch is compared per sample: its time per batch over the scale.
                applied = result.seen.get("applied", {})
                scale = (
                    int(row.fix.settings.get("batch.scale", 1)) if "batch.scale" in applied else 1
                )
                row.per_batch_s.append(result.per_batch_s)
                row.baseline_per_batch_s.append(base.per_batch_s)
                row.ratios.append(base.per_batch_s / (result.per_batch_s / scale))

    def _trial(self, settings: Mapping[str, Any], *, phase: str | None) -> TrialResult:
        self._runs += 1
        kwargs: dict[str, Any] = {} if self.environ is None else {"environ": self.environ}
        return run_trial(
            self.command,
            settings,
            self.budget,
            phase=phase,
            folder=self.folder,
            name=f"run{self._runs:03d}",
            min_batches=MIN_BATCHES,
            **kwargs,
        )

    @staticmethod
    def _diagnose(first: TrialResult) -> tuple[list[Finding], bool]:
        """The first run's findings, and whether it ran where a GPU was seen."""
        assert first.record is not None
        with Recording.open(first.record) as recording:
            diagnosis = diagnose(recording)
        return list(diagnosis.findings), bool(diagnosis.devices)


def _phase_estimate(finding: Finding) -> float | None:
    """The finding's estimated speed-up of the phase's steady steps: what `try` measures."""
    value = finding.evidence.get("phase_speedup")
    if isinstance(value, (int, float)):
        return float(value)
    return finding.speedup


def _nothing_reason(findings: Sequence[Finding]) -> str:
    codes = sorted({f.code for f in findings})
    if not codes:
        return "no finding: the steps wait on nothing a fix can change"
    return (
        f"the job is neither input- nor host-bound ({', '.join(codes)}: see each finding's "
        "fix, which no run-time setting applies)"
    )


def _unfixable(codes: Sequence[str], seen: Seen) -> str:
    if "INPUT_BOUND" in codes and seen.saw("torch.IterableDataset"):
        return (
            "INPUT_BOUND, but the input is an IterableDataset: workers would each yield every "
            "item unless it shards by worker — apply the finding's fix by hand"
        )
    if "INPUT_BOUND" in codes:
        return (
            "INPUT_BOUND, but the input is neither a DataLoader nor a tf.data pipeline that "
            "gpuwhy can change — apply the finding's fix by hand"
        )
    return (
        f"{', '.join(codes)}, but no setting gpuwhy can try applies (it tries Keras "
        "steps_per_execution, and saw no Keras compile) — apply the finding's fix by hand"
    )


def _spread(per_batch_s: Sequence[float]) -> float:
    """How much one side's runs vary: the highest time over the lowest, less one."""
    return max(per_batch_s) / min(per_batch_s) - 1.0 if per_batch_s else 0.0
