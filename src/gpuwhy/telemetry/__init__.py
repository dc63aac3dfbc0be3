"""gpuwhy.telemetry: sources (NVML, host), the job's process tree, and the sampler thread.

Importing this package imports no driver or psutil: sources load them when opened.
"""

from gpuwhy.telemetry.host import HostSource
from gpuwhy.telemetry.job import JobTracker
from gpuwhy.telemetry.sampler import Sampler, SamplerStats
from gpuwhy.telemetry.source import Snapshot, Source

__all__ = ["HostSource", "JobTracker", "Sampler", "SamplerStats", "Snapshot", "Source"]
