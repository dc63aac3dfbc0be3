"""Keep secrets out of what gpuwhy writes: mask what looks like a credential on a command line.

Reports and recordings travel (e-mail, a ticket, a chat, a CI artifact), and training commands
carry credentials:
`--hf-token hf_…`, `WANDB_API_KEY=… python train.py`, `--db postgres://user:pass@host`.
Masked: the value of an option whose name says it is secret, the value of a NAME=VALUE pair
whose name does, a password inside a URL, a bearer token, a private-key block, and any argument
shaped like a known token (the shapes and their sources: docs/sharing.md). Masking too much costs
a reader one value; masking too little leaks a credential, so the rules lean wide.

The command is masked once, where it enters a recording (`gpuwhy run`, `gpuwhy.monitor()`), and
every output shows it through `recorded_command`, which masks again (a recording from an older
gpuwhy) unless the run was recorded with `--no-redact`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

MASK = "***"
REDACTION_META = "redaction"  # the recording's meta key: "on", or "off" for `run --no-redact`

# Name parts that mark a secret: --token, --api-key, --password, HF_TOKEN, AWS_SECRET_ACCESS_KEY,
# --private-key, DB_PASSWD, --auth, --credentials, --client-secret, --pat...
_SECRET_NAME = re.compile(
    r"token|secret|passw(?:or)?d|passwd|pwd|key|credential|(?:^|[-_.])(?:auth|pat|pass)(?:$|[-_.])",
    re.IGNORECASE,
)
# Well-known credential shapes (prefixes documented by their issuers), whatever the option name.
_TOKEN_SHAPES = re.compile(
    r"^(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|sk-[A-Za-z0-9_-]{16,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}"
    r"|glpat-[A-Za-z0-9_-]{16,}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)$"
)
# A long run of letters and digits with no path or file punctuation: a key, not a path.
_OPAQUE = re.compile(r"^(?=.*[0-9])(?=.*[A-Za-z])[A-Za-z0-9_+=-]{32,}$")
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/:@\s]*:)[^@/\s]+(?=@)")
_BEARER = re.compile(r"(?P<head>\b(?:bearer|basic|token)\s+)\S+", re.IGNORECASE)
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_ASSIGNMENT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)=(?P<value>.*)$", re.DOTALL)


def is_secret_name(name: str) -> bool:
    """Whether an option or variable name (dashes stripped or not) says its value is secret."""
    return bool(_SECRET_NAME.search(name.lstrip("-")))


def looks_like_token(value: str) -> bool:
    """Whether a bare value has the shape of a credential."""
    return bool(_TOKEN_SHAPES.match(value) or _OPAQUE.match(value))


def _mask_value(value: str) -> str:
    if looks_like_token(value) or _PRIVATE_KEY.search(value):
        return MASK
    value = _BEARER.sub(lambda m: m.group("head") + MASK, value)
    return _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, value)


def redact_command(argv: Sequence[str]) -> list[str]:
    """The command with secret values replaced by MASK; names and everything else kept."""
    result: list[str] = []
    mask_next = False
    for arg in argv:
        if _PRIVATE_KEY.search(arg):  # a key block starts with dashes: not an option
            mask_next = False
            result.append(MASK)
            continue
        if mask_next:
            mask_next = False
            if not arg.startswith("-") or arg == "-":
                result.append(MASK)
                continue
        if arg.startswith("-") and len(arg) > 1:
            name, equals, value = arg.partition("=")
            if is_secret_name(name):
                if equals:
                    result.append(f"{name}={MASK}")
                else:
                    result.append(arg)
                    mask_next = True
                continue
            result.append(f"{name}={_mask_value(value)}" if equals else arg)
            continue
        assignment = _ASSIGNMENT.match(arg)
        if assignment and is_secret_name(assignment.group("name")):
            result.append(f"{assignment.group('name')}={MASK}")
            continue
        if assignment:
            result.append(f"{assignment.group('name')}={_mask_value(assignment.group('value'))}")
            continue
        result.append(_mask_value(arg))
    return result


def recorded_command(meta: Mapping[str, Any]) -> list[str]:
    """A recording's command as every output shows it: masked, unless it was recorded raw on
    purpose (`gpuwhy run --no-redact`)."""
    command = meta.get("command")
    parts = [str(part) for part in command] if isinstance(command, list) else []
    return parts if command_is_raw(meta) else redact_command(parts)


def command_is_raw(meta: Mapping[str, Any]) -> bool:
    """Whether the recording keeps its command unmasked, as asked with `--no-redact`."""
    return meta.get(REDACTION_META) == "off"
