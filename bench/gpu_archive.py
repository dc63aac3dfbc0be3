"""GPU-truth archives: pack a capture into one file that fits what the GPU machine gives back, and
unpack captures into tests/data/gpu/<date>-<gpu>/ with a provenance README."""

from __future__ import annotations

import json
import re
import shutil
import tarfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

TRACE_PATTERNS = ("*.trace.json.gz", "*.profile.zip", "*.pt.trace.json")
LEFT_HERE = {".cache", "logs"}  # the probe cache; logs (their tails are in the manifest)


class ArchiveError(Exception):
    """An archive that cannot be unpacked: missing, corrupt or not a capture."""


def _files(work: Path, dropped: set[Path]) -> list[Path]:
    return sorted(
        p
        for p in work.rglob("*")
        if p.is_file() and p not in dropped and p.relative_to(work).parts[0] != ".cache"
    )


def _write(work: Path, manifest: dict[str, Any], target: Path, dropped: set[Path]) -> None:
    (work / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
    with tarfile.open(target, "w:xz", preset=6) as tar:
        for path in _files(work, dropped):
            tar.add(path, arcname=str(path.relative_to(work)), recursive=False)


def pack(work: Path, manifest: dict[str, Any], out: Path, label: str, limit: int) -> Path:
    """`gpu-truth-<label>.tar.xz` in `out` (and the manifest beside it), at most `limit` bytes:
    profiler traces are left out, largest first, until it fits; the manifest names them."""
    target = out / f"gpu-truth-{label}.tar.xz"
    traces = sorted(
        (p for pattern in TRACE_PATTERNS for p in work.rglob(pattern)),
        key=lambda p: p.stat().st_size,
        reverse=True,
    )
    dropped: set[Path] = set()
    manifest["dropped_for_size"] = []
    manifest["over_limit"] = False
    _write(work, manifest, target, dropped)
    while target.stat().st_size > limit and traces:
        trace = traces.pop(0)
        dropped.add(trace)
        manifest["dropped_for_size"].append(str(trace.relative_to(work)))
        _write(work, manifest, target, dropped)
    if target.stat().st_size > limit:  # still too large without any trace: say so, keep it
        manifest["over_limit"] = True
        _write(work, manifest, target, dropped)
    shutil.copyfile(work / "manifest.json", out / f"manifest-{label}.json")
    return target


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def _folder_name(manifest: dict[str, Any]) -> str:
    gpus = manifest.get("machine", {}).get("gpus") or []
    gpu = gpus[0].get("name", "gpu") if gpus else "cpu-dry-run"
    return f"{str(manifest.get('started', 'undated'))[:10]}-{_slug(gpu)}"


def _manifest_of(tar: tarfile.TarFile, path: Path) -> dict[str, Any]:
    try:
        member = tar.extractfile("manifest.json")
        manifest = json.loads(member.read()) if member else None
    except (KeyError, ValueError) as error:
        raise ArchiveError(f"{path} holds no capture manifest (not a gpu-truth archive)") from error
    if not isinstance(manifest, dict) or manifest.get("kind") != "gpuwhy.gpu-truth":
        raise ArchiveError(f"{path} is not a gpu-truth archive (its manifest is another kind)")
    return manifest


def _safe_members(tar: tarfile.TarFile) -> Iterable[tarfile.TarInfo]:
    for member in tar.getmembers():
        parts = PurePosixPath(member.name).parts
        if not member.isfile() or member.name.startswith("/") or ".." in parts:
            continue
        if parts[0] in LEFT_HERE or member.name == "manifest.json":
            continue
        yield member


def unpack(archives: Iterable[Path], dest: Path) -> list[Path]:
    """Unpack each archive into dest/<date>-<gpu>/ (parts of one capture share it); write the
    folder's README from all the manifests in it. Returns the folders written."""
    written: list[Path] = []
    for path in archives:
        if not path.is_file():
            raise ArchiveError(f"{path}: no such archive (pass the gpu-truth-*.tar.xz file)")
        try:
            with tarfile.open(path, "r:*") as tar:
                manifest = _manifest_of(tar, path)
                folder = dest / _folder_name(manifest)
                folder.mkdir(parents=True, exist_ok=True)
                _clear_recaptured(folder, manifest)
                for member in _safe_members(tar):
                    target = folder / member.name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    if source is not None:
                        target.write_bytes(source.read())
        except (tarfile.TarError, EOFError, OSError) as error:
            cause = str(error).splitlines()[0].rstrip(":") if str(error) else type(error).__name__
            raise ArchiveError(
                f"{path} cannot be read ({cause}): not an archive, or cut short; copy it again"
            ) from error
        _manifest_path(folder, manifest).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        (folder / "README.md").write_text(readme(folder))
        if folder not in written:
            written.append(folder)
    return written


def _manifest_path(folder: Path, manifest: dict[str, Any]) -> Path:
    """`manifest-part<N>.json`; a second capture of the same part (a rerun of the scenarios
    the first one had no time for) gets `manifest-part<N>.<k>.json` instead of overwriting it."""
    stem = f"manifest-part{manifest['part']}"
    for k in range(1, 100):
        path = folder / (f"{stem}.json" if k == 1 else f"{stem}.{k}.json")
        if not path.exists() or json.loads(path.read_text()).get("started") == manifest["started"]:
            return path
    raise ArchiveError(f"{folder}: too many captures of part {manifest['part']}")


def _clear_recaptured(folder: Path, manifest: dict[str, Any]) -> None:
    """A scenario an earlier capture in this folder also ran: its old files go, so that the
    folder never mixes runs of two captures."""
    earlier = {
        name
        for m in _manifests(folder)
        if str(m.get("started")) < str(manifest["started"])
        for name in m["scenarios"]
    }
    for name in earlier & set(manifest["scenarios"]):
        shutil.rmtree(folder / name, ignore_errors=True)


def _manifests(folder: Path) -> list[dict[str, Any]]:
    """The folder's manifests, oldest capture first."""
    found = [json.loads(p.read_text()) for p in folder.glob("manifest-part*.json")]
    return sorted(found, key=lambda m: str(m.get("started")))


def _cell(value: Any) -> str:
    return "—" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def readme(folder: Path) -> str:
    """The provenance note of a capture folder, from its manifests."""
    manifests = _manifests(folder)
    first = manifests[0]
    machine = first.get("machine", {})
    gpus = machine.get("gpus") or []
    software = (machine.get("software") or {}).get("packages", {})
    lines = [
        f"# GPU truth captured {str(first.get('started'))[:10]}"
        f" on {gpus[0].get('name') if gpus else 'a CPU (dry run)'}",
        "",
        "Recorded by `python bench/gpu_truth.py capture` (bench/README.md) from this "
        "repository's own scenario jobs (bench/gpu_jobs/), on synthetic data: nothing here "
        "comes from a third party. Each scenario ran its slow and its fixed variant "
        "alternately under `gpuwhy run`; the truth below is the jobs' own timing, never "
        "gpuwhy's.",
        "",
        "## Machine",
        "",
    ]
    for gpu in gpus:
        lines.append(
            f"- GPU: {gpu.get('name')} ({gpu.get('memory.total')}, compute capability "
            f"{gpu.get('compute_cap')}, UUID {gpu.get('uuid')})"
        )
    lines += [
        f"- NVIDIA driver: {gpus[0].get('driver_version') if gpus else 'none'}; CUDA "
        f"(driver): {machine.get('cuda_driver_version') or 'none'}",
        f"- {machine.get('cpu_count')} CPUs; {machine.get('platform')}",
        f"- Python {(machine.get('software') or {}).get('python')}; "
        + ", ".join(f"{k} {v}" for k, v in sorted(software.items())),
        f"- gpuwhy commit: {first.get('commit')}",
        "",
    ]
    lines += [
        "## Parts",
        "",
        "| part | size | pairs | started | runs | failed | skipped for time "
        "| traces left out for size |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in manifests:
        failed = [r["name"] for r in m["runs"] if not r["ok"]]
        lines.append(
            f"| {m['part']} | {m['size']} | {m['pairs']} | {m['started']} | "
            f"{len(m['runs'])} | {', '.join(failed) or 'none'} | "
            f"{', '.join(m['skipped_for_time']) or 'none'} | "
            f"{', '.join(m.get('dropped_for_size', [])) or 'none'} |"
        )
    lines += [
        "",
        "## Scenarios and their measured truth",
        "",
        "Speed-ups are slow/fixed of the jobs' own `train` phase (steady state, after "
        "warm-up), medians over the pairs; *removed share* is 1 − fixed/slow of that "
        "phase: the part of it the fix removed.",
        "",
        "| scenario | what it proves | gpuwhy should say | pairs | train speed-up | job "
        "speed-up | removed share |",
        "|---|---|---|---|---|---|---|",
    ]
    # A scenario captured again later (its files overwritten by the later runs) is shown once,
    # with the later capture's truth: the one its files hold.
    latest = {name: s for m in manifests for name, s in m["scenarios"].items()}
    for name, s in latest.items():
        t = s["truth"]
        lines.append(
            f"| `{name}` | {s['proves']} | {s['expected'] or 'no finding yet'} | "
            f"{t['pairs']} | {_cell(t['train_speedup'])} | "
            f"{_cell(t['job_speedup'])} | {_cell(t['removed_share'])} |"
        )
    lines += [
        "",
        "## Files",
        "",
        "Per scenario folder: `<variant>-<pair>.gpuwhy.db` (the recording), "
        "`.report.json` (gpuwhy's JSON report), `.truth.json` (the job's own timings), "
        "and `profiled.*` with the profiler's trace of the slow variant "
        "(`profile.trace.json.gz`: torch.profiler; `profile.profile.zip`: jax.profiler). "
        "`extras/`: `doctor --save`, the gpu-marked tests (JUnit XML), the sampler's cost, "
        "the overhead of `gpuwhy run`, and `try-torch_loader.json`: `gpuwhy try --fix` with "
        "the --fixed variant's settings (its truth: the scenario's pairs). "
        "`manifest-part<N>.json`: every run's exact command, "
        "environment, exit code and wall time.",
        "",
    ]
    return "\n".join(lines)
