"""The layers import one way (docs/architecture.md): a module may import only from its own or lower
layers."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "gpuwhy"

# Lower number = lower layer. Modules at the package root are the foundation.
LAYER: dict[str, float] = {
    "model": 0,
    "errors": 0,
    "_version": 0,
    "nvml_codes": 0,
    "redact": 0,
    "rank_identity": 0,  # a process's rank, from its launcher's environment
    "warmup": 0,  # what counts as warm-up, for the analysis and the live line
    "cores": 0,  # the cores a process may use (affinity, container quota)
    "durations": 0,  # a time as the reports and the findings' titles write it
    "wire": 0.5,  # the job-to-run protocol speaks in model records
    "env": 1,
    "telemetry": 1,
    "hooks": 1,
    "recording": 2,
    "traces": 2,
    "runtime": 3,
    "analysis": 3,
    "tryout": 3.5,  # runs jobs (runtime) and diagnoses them (analysis)
    "report": 4,
    "cli": 5,
    "__init__": 5,
    "__main__": 6,
}
# Lazily imported public API in gpuwhy/__init__ reaches into hooks; that is the top.
HEAVY = {"tensorflow", "torch", "jax", "keras", "pynvml", "psutil"}


def _layer_of(path: Path) -> tuple[str, float]:
    part = path.relative_to(SRC).parts[0].removesuffix(".py")
    return part, LAYER[part]


def _imports(tree: ast.AST) -> list[tuple[str, bool]]:
    """(module, at_module_level) for every gpuwhy or heavy import in the file."""
    found: list[tuple[str, bool]] = []
    top_level = {id(node) for node in getattr(tree, "body", [])}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        found.extend((name, id(node) in top_level) for name in names)
    return found


def test_every_import_goes_down_or_sideways_within_its_package() -> None:
    problems = []
    for path in SRC.rglob("*.py"):
        package, layer = _layer_of(path)
        for name, _ in _imports(ast.parse(path.read_text())):
            if not name.startswith("gpuwhy."):
                continue
            target = name.split(".")[1]
            if target in LAYER and target != package and LAYER[target] >= layer:
                problems.append(f"{path.relative_to(SRC)} imports {name}")
    assert problems == []


def test_no_framework_is_imported_at_module_level() -> None:
    problems = []
    for path in SRC.rglob("*.py"):
        for name, top in _imports(ast.parse(path.read_text())):
            if top and name.split(".")[0] in HEAVY:
                problems.append(f"{path.relative_to(SRC)} imports {name} at module level")
    assert problems == []


# Inside report/, the page and the trace export are separate outputs: the trace export may reuse
# the page's tier plan (html.tiers), the page never reaches into the export.
SUBPACKAGE_ORDER = {"report": {"html": 1, "perfetto": 2}}


def test_subpackages_import_one_way() -> None:
    problems = []
    for package, order in SUBPACKAGE_ORDER.items():
        for sub, rank in order.items():
            for path in (SRC / package / sub).rglob("*.py"):
                for name, _ in _imports(ast.parse(path.read_text())):
                    parts = name.split(".")
                    if parts[:2] != ["gpuwhy", package] or len(parts) < 3:
                        continue
                    if parts[2] in order and order[parts[2]] > rank:
                        problems.append(f"{path.relative_to(SRC)} imports {name}")
    assert problems == []
    assert {p.name for p in (SRC / "report").iterdir() if (p / "__init__.py").exists()} == set(
        SUBPACKAGE_ORDER["report"]
    )
