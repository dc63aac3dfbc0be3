"""gpuwhy.traces: profiler traces users already have, read into what the kernel analysis needs.

`load_traces(path)` takes a Kineto trace file or a directory of them (one file per rank), or a
TensorFlow/JAX profile (`*.xplane.pb`, or the log directory that holds them).
"""

from gpuwhy.traces.kineto import TraceError, read_kineto
from gpuwhy.traces.load import is_trace_path, load_traces
from gpuwhy.traces.rank_trace import DeviceOps, HostCall, OpKind, RankTrace

__all__ = [
    "DeviceOps",
    "HostCall",
    "OpKind",
    "RankTrace",
    "TraceError",
    "is_trace_path",
    "load_traces",
    "read_kineto",
]
