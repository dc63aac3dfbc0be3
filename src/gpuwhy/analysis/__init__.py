"""gpuwhy.analysis: a recording in, a `Diagnosis` out — phases, GPUs per phase, findings.

`diagnose(recording)` is the entry point; reporters (`gpuwhy.report`) render its result.
"""

from gpuwhy.analysis.diagnose import DeviceStats, Diagnosis, diagnose
from gpuwhy.analysis.phases import PhaseStats
from gpuwhy.analysis.rules import RUNTIME_CODES

__all__ = ["RUNTIME_CODES", "DeviceStats", "Diagnosis", "PhaseStats", "diagnose"]
