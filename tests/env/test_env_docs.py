"""docs/doctor.md documents every environment finding code the rules can produce."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gpuwhy.env import codes

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "src" / "gpuwhy" / "env" / "rules"


def test_every_code_has_a_section_in_the_docs() -> None:
    text = (ROOT / "docs" / "doctor.md").read_text()
    documented = set(re.findall(r"^### ([A-Z_]+)(?: \(| and)", text, flags=re.MULTILINE))
    documented |= set(re.findall(r"^### [A-Z_]+ \(\w+\) and ([A-Z_]+)", text, flags=re.MULTILINE))
    assert documented == set(codes.ALL)


def test_every_code_is_produced_by_a_rule() -> None:
    used = set()
    for path in RULES.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "codes"
            ):
                used.add(node.attr)
    assert used == set(codes.ALL)
