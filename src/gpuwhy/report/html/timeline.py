"""The timeline's data: per-GPU and host series in downsampled tiers, phase bands, data wait.

Where the budget keeps a sub-second grid (runs up to a few hours), one streaming pass over the
GPU samples and one over the host samples fill it; where the grid is whole seconds (long runs),
the recording's stored tiers fill it instead, read as columns a block at a time (a day on 8 GPUs:
11,520 blocks of 1-s buckets instead of 7 million samples, a few seconds). Then one pass over
the WAIT spans' columns. Memory is the finest tier's buckets
(bounded by the byte budget), never the samples. The result is plain JSON that the page's script
draws (assets/timeline.js); its size is bounded by `budget_bytes` plus the phase intervals,
themselves capped (phases.MAX_INTERVALS).
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuwhy.analysis import Diagnosis
from gpuwhy.analysis.workers import Workers, shares
from gpuwhy.model import NS_PER_S, DeviceInfo, GpuSample, HostSample, SpanKind
from gpuwhy.report.html.phases import WAIT_COLOR, phase_bands
from gpuwhy.report.html.tiers import (
    Buckets,
    Scale,
    TierPlan,
    add_coverages,
    fraction_tiers,
    plan_tiers,
    series_tiers,
)

if TYPE_CHECKING:
    from gpuwhy.recording.reader import Recording
    from gpuwhy.recording.tiercolumns import TierColumns
    from gpuwhy.recording.tiers import TierBucket

GiB = 2**30
TIMELINE_BUDGET_BYTES = 4_700_000  # the timeline's JSON when the caller gives no budget
STRUCTURE_BYTES = 64_000  # labels, colours and keys around the encoded series (a few KB per GPU)
DEFAULT_PERIOD_S = 0.1  # `gpuwhy run`'s default sampling period
_PEEK_ROWS_PER_DEVICE = 50  # rows read ahead to learn the sampling period


@dataclass(frozen=True)
class _Metric:
    """One drawn series of a GPU or the host: a record field, shown as field / divisor."""

    field: str  # GpuSample / HostSample field name (also the name in the recording's tiers)
    label: str
    chart: str
    divisor: float
    integral: bool
    style: str  # "area" (filled to zero) or "line"
    color: str


GPU_METRICS = (
    _Metric("util_gpu_pct", "GPU utilization", "util", 1, True, "area", "#3b7dd8"),
    _Metric("sm_active_permille", "SM active", "util", 10, True, "line", "#0b2e6b"),
    _Metric("memory_used_bytes", "memory used", "mem", GiB, True, "area", "#17a589"),
    _Metric("job_memory_bytes", "job's memory", "mem", GiB, True, "line", "#0b5345"),
    _Metric("power_mw", "power", "power", 1000, True, "area", "#d35400"),
    _Metric("pcie_tx_kbps", "PCIe to host (tx)", "pcie", 1000, True, "line", "#8e44ad"),
    _Metric("pcie_rx_kbps", "PCIe to GPU (rx)", "pcie", 1000, True, "line", "#c0392b"),
)
HOST_METRICS = (
    _Metric("cpu_system_pct", "machine CPU", "cpu", 1, False, "area", "#5d6d7e"),
    _Metric("job_cpu_pct", "job's CPU", "jobcpu", 1, False, "area", "#a04000"),
)
_CHARTS = {  # id -> (title, unit)
    "util": ("Utilization", "%"),
    "mem": ("Memory", "GiB"),
    "power": ("Power", "W"),
    "pcie": ("PCIe", "MB/s"),
    "cpu": ("CPU, all cores", "%"),
    "jobcpu": ("Job CPU", "% of a core"),
}


def nice_ceiling(value: float) -> float:
    """The next 1, 1.5, 2, 3, 4, 5, 6 or 8 × 10^k at or above `value` (axis maxima that read
    well without leaving most of the chart empty)."""
    if value <= 0 or not math.isfinite(value):
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 1.5, 2, 3, 4, 5, 6, 8, 10):
        if value <= step * power * (1 + 1e-9):
            return float(step * power)
    return float(10 * power)


def _period_ns(meta: Mapping[str, Any], times: list[int]) -> int:
    interval = meta.get("interval_s")
    if isinstance(interval, (int, float)) and not isinstance(interval, bool) and interval > 0:
        return max(round(interval * NS_PER_S), 1)
    distinct = sorted(set(times))
    gaps = [b - a for a, b in itertools.pairwise(distinct) if b > a]
    return max(int(statistics.median(gaps)), 1) if gaps else round(DEFAULT_PERIOD_S * NS_PER_S)


class _Collector:
    """Finest-tier buckets of every series, filled from samples or from a recording's tiers."""

    def __init__(self, plan: TierPlan) -> None:
        self.plan = plan
        self.width = plan.widths_ns[0]
        self.count = plan.counts[0]
        self.series: dict[tuple[Any, str], Buckets] = {}  # (lane, field) -> buckets

    def _buckets(self, lane: Any, field: str) -> Buckets:
        buckets = self.series.get((lane, field))
        if buckets is None:
            buckets = self.series[(lane, field)] = Buckets(self.count)
        return buckets

    def feed_samples(
        self, samples: Iterable[Any], lane_of: Callable[[Any], Any], metrics: tuple[_Metric, ...]
    ) -> None:
        """Every sample, one by one: exact at any grid, about 5 µs a sample."""
        origin, width, count = self.plan.origin_ns, self.width, self.count
        fields = [m.field for m in metrics]
        series = self.series
        for sample in samples:
            index = (sample.t_ns - origin) // width
            if not 0 <= index < count:
                continue
            lane = lane_of(sample)
            for field in fields:
                value = getattr(sample, field)
                if value is not None:
                    buckets = series.get((lane, field)) or self._buckets(lane, field)
                    buckets.add(index, value)

    def feed_tiers(
        self,
        buckets: Iterable[TierBucket],
        lane_of: Callable[[TierBucket], Any],
        metrics: tuple[_Metric, ...],
    ) -> None:
        """A recording's stored tier buckets (count, sum, min, max): the same numbers as the
        samples give, read at a fraction of the cost on long runs."""
        origin, width, count = self.plan.origin_ns, self.width, self.count
        for bucket in buckets:
            index = (bucket.t_ns - origin) // width
            if not 0 <= index < count:
                continue
            lane = lane_of(bucket)
            found = bucket.metrics  # built on each access: read it once per bucket
            for metric in metrics:
                summary = found.get(metric.field)
                if (
                    summary is None
                    or not summary.n
                    or summary.minimum is None
                    or summary.maximum is None
                ):
                    continue
                self._buckets(lane, metric.field).add_summary(
                    index, summary.n, summary.total, summary.minimum, summary.maximum
                )

    def feed_tier_columns(
        self,
        parts: Iterable[TierColumns],
        lane_of: Callable[[TierColumns], Any],
        metrics: tuple[_Metric, ...],
    ) -> None:
        """A recording's tiers as columns, at the grid's width (`Recording.gpu_tier_columns`):
        what `feed_tiers` adds, a block of buckets at a time (a day of 8 GPUs in a second or
        two instead of a minute)."""
        origin, width = self.plan.origin_ns, self.width
        # Gathered per series and added once: a series' blocks follow each other in time, so
        # its buckets form one run the arrays take in a few C-speed passes.
        pending: dict[
            tuple[Any, str], tuple[list[int], list[Any], list[Any], list[Any], list[Any]]
        ] = {}
        for part in parts:
            if not part.t_ns:
                continue
            lane = lane_of(part)
            indices = [(t - origin) // width for t in part.t_ns]
            for metric in metrics:
                columns = part.metrics.get(metric.field)
                if columns is None or not any(columns.n):
                    continue
                held = pending.get((lane, metric.field))
                if held is None:
                    held = pending[(lane, metric.field)] = ([], [], [], [], [])
                if held[0] and indices[0] <= held[0][-1]:  # out of order (a late block)
                    self._buckets(lane, metric.field).add_columns(*held)
                    held = pending[(lane, metric.field)] = ([], [], [], [], [])
                for target, values in zip(held, (indices, *columns), strict=True):
                    target.extend(values)
        for (lane, field), held in pending.items():
            self._buckets(lane, field).add_columns(*held)


def _chart_max(chart: str, observed: float, device: DeviceInfo | None) -> float:
    if chart in ("util", "cpu"):
        return 100.0
    if chart == "mem" and device is not None and device.memory_total_bytes:
        return max(device.memory_total_bytes / GiB, observed)
    if chart == "power" and device is not None and device.power_limit_mw:
        return max(device.power_limit_mw / 1000, observed)
    # 10 % headroom: a line at the series' own maximum stays visible under the chart's edge.
    return nice_ceiling(max(observed * 1.1, 100.0 if chart == "jobcpu" else 1.0))


def _lane(
    title: str,
    lane: Any,
    metrics: tuple[_Metric, ...],
    collector: _Collector,
    device: DeviceInfo | None,
    period_ns: int,
) -> dict[str, Any] | None:
    charts = []
    for chart in dict.fromkeys(m.chart for m in metrics):
        present = []
        for metric in metrics:
            buckets = collector.series.get((lane, metric.field))
            bounds = buckets.observed_range() if buckets is not None else None
            if metric.chart == chart and buckets is not None and bounds is not None:
                present.append((metric, buckets, bounds))
        if not present:
            continue
        top = _chart_max(chart, max(b[1] / m.divisor for m, _, b in present), device)
        series = []
        for metric, buckets, (low, high) in present:
            scale = Scale.for_range(low, high, integral=metric.integral)  # in record units
            series.append(
                {
                    "label": metric.label,
                    "color": metric.color,
                    "style": metric.style,
                    "low": scale.low / metric.divisor,
                    "step": scale.step / metric.divisor,
                    "tiers": series_tiers(buckets, collector.plan, scale),
                }
            )
        title_text, unit = _CHARTS[chart]
        charts.append(
            {"id": chart, "title": title_text, "unit": unit, "max": top, "series": series}
        )
    # The page bridges gaps up to this long: a lane sampled more slowly than the grid's period
    # (a host source at 2 Hz beside GPUs at 10 Hz) still draws as one line.
    period_s = period_ns / NS_PER_S
    return {"title": title, "charts": charts, "period_s": period_s} if charts else None


def _peek(recording: Recording) -> tuple[list[GpuSample], list[HostSample]]:
    devices = max(len(recording.devices), 1)
    gpu = list(itertools.islice(recording.gpu_samples(), _PEEK_ROWS_PER_DEVICE * devices))
    host = list(itertools.islice(recording.host_samples(), _PEEK_ROWS_PER_DEVICE))
    return gpu, host


def _series_count(
    recording: Recording, gpu_peek: list[GpuSample], host_peek: list[HostSample]
) -> int:
    """How many series to plan for: every GPU (seen or listed) with each metric the first
    samples of any GPU carry, and the host's. A metric that only appears later makes the page
    a little larger than planned; render_html's size check catches that."""
    gpus = {s.device for s in gpu_peek} | {d.index for d in recording.devices}
    fields = {m.field for s in gpu_peek for m in GPU_METRICS if getattr(s, m.field) is not None}
    host = {m.field for s in host_peek for m in HOST_METRICS if getattr(s, m.field) is not None}
    return len(gpus) * len(fields) + len(host)


def _wait_tiers(recording: Recording, plan: TierPlan) -> list[dict[str, str]] | None:
    covered = [0.0] * plan.counts[0]
    processes: set[int | None] = set()
    for block in recording.span_columns(kind=SpanKind.WAIT, steps=False):
        processes.add(block.pid)
        add_coverages(covered, plan, block.start_ns, block.duration_ns)
    if not processes:
        return None
    return fraction_tiers(covered, plan, len(processes))


def _tiered(plan: TierPlan) -> bool:
    """Whether the grid's buckets are made of the recording's stored tiers (else: samples)."""
    width, origin = plan.widths_ns[0], plan.origin_ns
    return not plan.raw and width % NS_PER_S == 0 and origin % width == 0


def _grid(plan: TierPlan) -> tuple[int, int, int]:
    """(bucket width, first bucket start, end of the last) of the finest tier, in ns."""
    width, origin = plan.widths_ns[0], plan.origin_ns
    return width, origin, origin + width * plan.counts[0]


def gpu_lanes(
    recording: Recording, plan: TierPlan, period_ns: int, devices: Sequence[int] | None = None
) -> list[tuple[int, dict[str, Any] | None]]:
    """(GPU index, its lane: None if nothing to draw) of every GPU with samples (of `devices`)."""
    collector = _Collector(plan)
    fields = [m.field for m in GPU_METRICS]
    for device in [None] if devices is None else devices:
        if _tiered(plan):
            columns = recording.gpu_tier_columns(*_grid(plan), metrics=fields, device=device)
            collector.feed_tier_columns(columns, _device_of, GPU_METRICS)
        else:
            collector.feed_samples(recording.gpu_samples(device), _device_of, GPU_METRICS)
    infos = {d.index: d for d in recording.devices}
    lanes = []
    for index in sorted({lane for lane, _ in collector.series}):
        info = infos.get(index)
        title = f"GPU {index}" + (f" · {info.name}" if info else "")
        lanes.append((index, _lane(title, index, GPU_METRICS, collector, info, period_ns)))
    return lanes


def gpu_lanes_at(
    path: str, plan: TierPlan, period_ns: int, devices: Sequence[int]
) -> list[tuple[int, dict[str, Any] | None]]:
    """In a worker (analysis/workers.py): `gpu_lanes` of these GPUs of the recording at `path`."""
    from gpuwhy.recording.reader import Recording

    with Recording.open(path) as recording:
        return gpu_lanes(recording, plan, period_ns, devices)


def _device_of(sample: Any) -> Any:
    return sample.device


def timeline_data(
    diagnosis: Diagnosis,
    recording: Recording,
    *,
    budget_bytes: int = TIMELINE_BUDGET_BYTES,
    workers: Workers | None = None,
) -> dict[str, Any]:
    """Everything the page's timeline draws, as JSON-ready data (times relative to run start).

    Its JSON text stays within about `budget_bytes`: the phase bands take what they need (at most
    MAX_INTERVALS), the series the rest, at the finest resolution that fits. With `workers`,
    they draw the GPUs' lanes, a share of the GPUs each, while this process draws the rest.
    """
    meta = recording.meta
    bounds = recording.time_range()
    start_ns = (recording.run_bounds() or (0, 0))[0]
    end_ns = max(start_ns + round(diagnosis.duration_s * NS_PER_S), bounds[1] if bounds else 0)
    gpu_peek, host_peek = _peek(recording)
    first = min([s.t_ns for s in gpu_peek[:1]] + [s.t_ns for s in host_peek[:1]], default=start_ns)
    period = _period_ns(meta, [s.t_ns for s in gpu_peek] or [s.t_ns for s in host_peek])
    host_period = _period_ns({}, [s.t_ns for s in host_peek]) if len(host_peek) > 1 else period
    host_of: Callable[[Any], Any] = lambda s: "host"  # noqa: E731
    phases = phase_bands(diagnosis, start_ns, end_ns - start_ns)
    series_budget = budget_bytes - len(json.dumps(phases)) - STRUCTURE_BYTES
    # The grid keeps the samples' phase (each lands mid-bucket) and reaches back to the start.
    aligned = first - max(math.ceil((first - start_ns) / period), 0) * period
    series = max(_series_count(recording, gpu_peek, host_peek), 1)
    plan = plan_tiers(
        aligned,
        end_ns,
        period,
        full_series=series,
        mean_series=1,
        budget_bytes=max(series_budget, 0),
    )
    gpu = (
        [
            workers.submit(gpu_lanes_at, str(recording.path), plan, period, devices)
            for devices in shares(recording.sampled_devices(), workers.count)
        ]
        if workers is not None and workers.count and _tiered(plan)
        else []
    )
    host = _Collector(plan)
    if _tiered(plan):
        host.feed_tier_columns(
            recording.host_tier_columns(*_grid(plan), metrics=[m.field for m in HOST_METRICS]),
            host_of,
            HOST_METRICS,
        )
    else:
        host.feed_samples(recording.host_samples(), host_of, HOST_METRICS)
    host_lane = _lane("Host", "host", HOST_METRICS, host, None, max(host_period, period))
    parts = workers.results(gpu) if workers is not None and gpu else None
    found = (
        [lane for part in parts for lane in part]
        if parts is not None
        else gpu_lanes(recording, plan, period)
    )
    found.sort(key=lambda pair: pair[0])
    indices = [index for index, _ in found]
    lanes = [lane for _, lane in found if lane is not None]
    infos = {d.index: d for d in recording.devices}
    return {
        "duration_s": (end_ns - start_ns) / NS_PER_S,
        "period_s": period / NS_PER_S,
        "raw": plan.raw,
        "tiers": [
            {
                "offset_s": (plan.origin_ns - start_ns) / NS_PER_S,
                "bucket_s": w / NS_PER_S,
                "count": c,
            }
            for w, c in zip(plan.widths_ns, plan.counts, strict=True)
        ],
        "gpu_lanes": lanes,
        "host_lane": host_lane,
        "phases": phases,
        "wait": _wait_tiers(recording, plan),
        "wait_color": WAIT_COLOR,
        "devices_without_samples": [i for i in sorted(infos) if i not in indices],
    }
