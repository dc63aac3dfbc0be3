"""Read a TensorFlow / JAX profile (`*.xplane.pb`, one file a host) into a `RankTrace`.

The file is an XSpace protobuf. It is parsed with the definitions TensorFlow or XProf ship
(`xplane_pb2`), loaded from their installed files without importing the frameworks themselves.
What is kept, as for a Kineto trace:

- device work: the events of each ``/device:GPU:N`` plane's ``Stream #…`` lines (kernels,
  ``Memcpy*``, ``Memset``), with their ``correlation_id``;
- launches: host events that carry a ``correlation_id`` (the CUDA API calls that queued them);
- steps: the ``Steps`` line XProf derives on the device planes (the first plane that has one);
  where there is none (a profile of a CPU, or one no device plane grouped), the host's root step
  markers: events with a ``step_num`` stat and ``_r`` set, as `tf.profiler.experimental.Trace`
  and `jax.profiler.StepTraceAnnotation` write them (the ones `gpuwhy run --profile` adds);
- the input wait: host ``IteratorGetNext…`` events (XProf counts them as waiting for input), and
  where the profiler traced Python (JAX's default), the calls into Keras's data adapters
  (``$py_dataset_adapter.py:257 _finite_generator``: a PyDataset's batches, and the like);
- blocking syncs: host ``cuStreamSynchronize``/``cuCtxSynchronize``/``cuEventSynchronize``.

Times are the line's ``timestamp_ns`` plus the event's ``offset_ps``, in nanoseconds.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from gpuwhy.traces.kineto import TraceError
from gpuwhy.traces.rank_trace import HostCall, OpKind, RankTrace

# Where the generated module lies inside each package that ships it.
_PB2_HOMES = (
    ("tensorflow", ("tsl", "profiler", "protobuf", "xplane_pb2.py")),
    ("xprof", ("protobuf", "xplane_pb2.py")),
    ("tensorboard_plugin_profile", ("protobuf", "xplane_pb2.py")),
)
_GPU_PLANE = re.compile(r"/device:GPU:(\d+)$")
_SYNC_NAMES = {"cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize"}
# The Python tracer's events are "$<file>:<line> <function>": Keras's data adapters hand `fit`
# its batches (each resume of their generators is an event).
_KERAS_INPUT = re.compile(
    r"\$(?:(?:py_dataset|array|generator|tf_dataset|torch_data_loader|grain_dataset)_adapter"
    r"|data_adapter_utils)\.py:\d+ "
)
_COMM = re.compile(r"nccl|rccl", re.IGNORECASE)
_module: ModuleType | None = None


def _pb2() -> ModuleType:
    """The xplane_pb2 module of an installed TensorFlow or XProf, loaded by path."""
    global _module
    if _module is not None:
        return _module
    for package, parts in _PB2_HOMES:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.submodule_search_locations:
            continue
        for location in spec.submodule_search_locations:
            path = Path(location, *parts)
            if path.is_file():
                loaded = importlib.util.spec_from_file_location("gpuwhy_xplane_pb2", path)
                if loaded is None or loaded.loader is None:
                    continue
                module = importlib.util.module_from_spec(loaded)
                try:
                    loaded.loader.exec_module(module)
                except Exception:  # a protobuf runtime that does not match: try the next
                    continue
                _module = module
                return module
    raise TraceError(
        "reading .xplane.pb profiles needs the definitions TensorFlow or XProf ship",
        "install one where gpuwhy runs: pip install xprof (or tensorflow)",
    )


def xplane_files(directory: Path) -> list[Path]:
    """The host files of the newest profiling run under ``directory`` (a TensorBoard logdir,
    its ``plugins/profile``, or one run's folder)."""
    found = sorted(directory.rglob("*.xplane.pb"))
    if not found:
        return []
    newest_run = max(path.parent for path in found)  # run folders are named by date and time
    return [path for path in found if path.parent == newest_run]


def read_xplane(path: str) -> RankTrace:
    """The kept columns of one host's XSpace."""
    module = _pb2()
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise TraceError(
            f"cannot read {path}: {error.strerror or error}", "check the path"
        ) from None
    space = module.XSpace()
    try:
        space.ParseFromString(data)
    except Exception:
        raise TraceError(
            f"{path} is truncated or not an XSpace profile",
            "give the .xplane.pb file as the profiler wrote it",
        ) from None
    trace = RankTrace(path=path, format="xplane")
    names: dict[str, int] = {}
    host_steps: list[tuple[int, int, int]] = []
    known = 0
    for plane in space.planes:
        match = _GPU_PLANE.search(plane.name)
        if match:
            _take_device_plane(trace, plane, int(match.group(1)), names)
        elif plane.name == "/host:CPU":
            host_steps = _take_host_plane(trace, plane)
        else:
            continue
        known += 1
    if not trace.steps:
        trace.steps = sorted(host_steps, key=lambda step: step[1])
    if not known:
        raise TraceError(
            f"{path} holds no host or GPU plane: not a profile of a TensorFlow/JAX job",
            "give the .xplane.pb file the profiler wrote under plugins/profile/<run>/",
        )
    return trace


def _stat_names(plane: Any) -> dict[int, str]:
    return {key: meta.name for key, meta in plane.stat_metadata.items()}


def _events(plane: Any, line: Any) -> Iterator[tuple[str, int, int, Any]]:
    base = line.timestamp_ns
    for event in line.events:
        start = base + event.offset_ps // 1000
        yield (
            plane.event_metadata[event.metadata_id].name,
            start,
            start + event.duration_ps // 1000,
            event,
        )


def _stat(event: Any, stat_names: dict[int, str], wanted: str) -> Any:
    """The value of the event's stat named ``wanted`` (a string stat kept by reference is
    resolved through the plane's stat metadata), or None."""
    for stat in event.stats:
        if stat_names.get(stat.metadata_id) == wanted:
            kind = stat.WhichOneof("value")
            if kind == "ref_value":
                return stat_names.get(stat.ref_value)
            return getattr(stat, kind) if kind else None
    return None


def _take_device_plane(trace: RankTrace, plane: Any, device: int, names: dict[str, int]) -> None:
    stat_names = _stat_names(plane)
    trace.devices.setdefault(device, f"GPU {device}")
    for line in plane.lines:
        if line.name == "Steps" and not trace.steps:
            for name, start, end, _ in _events(plane, line):
                number = int(name) if name.isdigit() else len(trace.steps)
                trace.steps.append((number, start, end))
            continue
        if not line.name.startswith("Stream #"):
            continue  # derived lines (TensorFlow Ops, XLA Ops...) repeat the same work
        for name, start, end, event in _events(plane, line):
            if name.startswith("Memcpy"):
                kind = OpKind.MEMCPY
            elif name.startswith("Memset"):
                kind = OpKind.MEMSET
            else:
                kind = OpKind.COMMUNICATION if _COMM.search(name) else OpKind.COMPUTE
                if not trace.backward_seen and "gradient" in str(
                    _stat(event, stat_names, "annotation") or ""
                ):
                    trace.backward_seen = True
            index = names.get(name)
            if index is None:
                index = names[name] = len(trace.names)
                trace.names.append(name)
            correlation = _stat(event, stat_names, "correlation_id") or 0
            trace.ops.append(start, end, device, line.id, int(kind), index, int(correlation))


def _take_host_plane(trace: RankTrace, plane: Any) -> list[tuple[int, int, int]]:
    """Keeps the host's launches, input waits and syncs; returns its root step markers."""
    stat_names = _stat_names(plane)
    ids = {name: key for key, name in stat_names.items() if name in ("step_num", "_r")}
    number_id, root_id = ids.get("step_num"), ids.get("_r")
    steps: list[tuple[int, int, int]] = []
    for line in plane.lines:
        for name, start, end, event in _events(plane, line):
            if number_id is not None and root_id is not None and len(event.stats) >= 2:
                marker = _step_marker(event, number_id, root_id)
                if marker is not None:
                    steps.append((marker, start, end))
                    continue
            correlation = _stat(event, stat_names, "correlation_id")
            if correlation:
                trace.launch_start_ns[int(correlation)] = start
                trace.add_launch(start, end)
            elif name.startswith("IteratorGetNext") or _KERAS_INPUT.match(name):
                trace.loader.append(HostCall(name, start, end, line.id))
            elif name in _SYNC_NAMES:
                trace.syncs.append(HostCall(name, start, end, line.id))
    return steps


def _step_marker(event: Any, number_id: int, root_id: int) -> int | None:
    """The step number of a root step marker (stats ``step_num`` and ``_r``), else None."""
    number: Any = None
    root = False
    for stat in event.stats:
        if stat.metadata_id == number_id:
            kind = stat.WhichOneof("value")
            number = getattr(stat, kind) if kind else 0  # a zero is stored as no value
        elif stat.metadata_id == root_id:
            kind = stat.WhichOneof("value")
            root = bool(getattr(stat, kind)) if kind else False
    if number is None or not root:
        return None
    try:
        return int(number or 0)
    except (TypeError, ValueError):
        return None


def environment_has_pb2() -> bool:
    """Whether xplane profiles can be read here (tests and docs say when they cannot)."""
    try:
        _pb2()
    except TraceError:
        return False
    return True
