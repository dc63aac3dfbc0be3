"""Find and read the traces a path names: one trace file, or a directory of them (one per rank
for Kineto; a TensorBoard log directory's newest profiling run, one file a host, for XPlane).

A gpuwhy recording is SQLite; a trace is JSON (plain or gzip). The first bytes tell them apart,
whatever the file is called.
"""

from __future__ import annotations

from pathlib import Path

from gpuwhy.traces.kineto import TraceError, read_kineto
from gpuwhy.traces.rank_trace import RankTrace
from gpuwhy.traces.xplane import read_xplane, xplane_files

_SQLITE_MAGIC = b"SQLite format 3\x00"
_GZIP_MAGIC = b"\x1f\x8b"
_XPLANE_SUFFIX = ".xplane.pb"


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read(16)
    except OSError:
        return b""


def _looks_like_trace_file(path: Path) -> bool:
    head = _head(path)
    return head.startswith(_GZIP_MAGIC) or head.lstrip()[:1] == b"{"


def _trace_files(directory: Path) -> list[Path]:
    return sorted(
        path
        for path in directory.iterdir()
        if path.is_file() and path.name.endswith((".json", ".json.gz"))
    )


def is_trace_path(path: str) -> bool:
    """Whether ``path`` names profiler traces rather than a gpuwhy recording."""
    candidate = Path(path)
    if candidate.is_dir():
        return True
    if not candidate.is_file():
        return False
    return candidate.name.endswith(_XPLANE_SUFFIX) or _looks_like_trace_file(candidate)


def load_traces(path: str) -> list[RankTrace]:
    """Every rank's trace under ``path``, ordered by rank; TraceError (exit 2) if there is none."""
    candidate = Path(path)
    if candidate.is_file() and candidate.name.endswith(_XPLANE_SUFFIX):
        return [read_xplane(str(candidate))]
    xplanes = xplane_files(candidate) if candidate.is_dir() else []  # one walk of the folder
    if xplanes:
        return [read_xplane(str(file)) for file in xplanes]
    if candidate.is_dir():
        files = [file for file in _trace_files(candidate) if _looks_like_trace_file(file)]
        if not files:
            raise TraceError(
                f"{path} holds no profiler trace (*.json or *.json.gz)",
                "give the directory torch.profiler's tensorboard_trace_handler wrote, or one file",
            )
    elif candidate.is_file():
        files = [candidate]
    else:
        raise TraceError(f"{path} does not exist", "check the path")
    traces = [read_kineto(str(file)) for file in files]
    _check_ranks(path, traces)
    return sorted(traces, key=lambda trace: (trace.rank is None, trace.rank or 0, trace.path))


def _check_ranks(path: str, traces: list[RankTrace]) -> None:
    seen: dict[int, str] = {}
    for trace in traces:
        if trace.rank is None:
            continue
        if trace.rank in seen:
            raise TraceError(
                f"{path} holds two traces of rank {trace.rank} "
                f"({Path(seen[trace.rank]).name}, {Path(trace.path).name})",
                "give one profiling window per rank: one file, or a directory of one file a rank",
            )
        seen[trace.rank] = trace.path
