"""gpuwhy.env: probes gather facts about the machine and its frameworks; rules make findings.

Probes run concurrently, frameworks only in subprocesses of the target interpreter (never in
gpuwhy's own process); rules are pure functions over the JSON facts, so saved facts can be
re-evaluated anywhere (`gpuwhy doctor --save` / `--from`).
"""

from __future__ import annotations

from gpuwhy.env.collect import collect_facts
from gpuwhy.env.factfile import (
    FACTS_KIND,
    FACTS_SCHEMA_VERSION,
    load_facts,
    save_facts,
    validate_facts,
)
from gpuwhy.env.rules import evaluate
from gpuwhy.env.verdicts import verdicts

__all__ = [
    "FACTS_KIND",
    "FACTS_SCHEMA_VERSION",
    "collect_facts",
    "evaluate",
    "load_facts",
    "save_facts",
    "validate_facts",
    "verdicts",
]
