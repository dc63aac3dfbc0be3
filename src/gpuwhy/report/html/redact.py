"""Keep secrets out of a shared report: mask what looks like a credential on a command line.

An HTML report travels (e-mail, a ticket, a chat), and training commands carry credentials:
`--hf-token hf_…`, `WANDB_API_KEY=… python train.py`, `--db postgres://user:pass@host`. Masked:
the value of an option whose name says it is secret, the value of a NAME=VALUE pair whose name
does, a password inside a URL, and any argument shaped like a known token. Masking too much
costs a reader one value; masking too little leaks a credential, so the rules lean wide.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MASK = "***"

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
_ASSIGNMENT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)=(?P<value>.*)$", re.DOTALL)


def is_secret_name(name: str) -> bool:
    """Whether an option or variable name (dashes stripped or not) says its value is secret."""
    return bool(_SECRET_NAME.search(name.lstrip("-")))


def looks_like_token(value: str) -> bool:
    """Whether a bare value has the shape of a credential."""
    return bool(_TOKEN_SHAPES.match(value) or _OPAQUE.match(value))


def _mask_value(value: str) -> str:
    if looks_like_token(value):
        return MASK
    return _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, value)


def redact_command(argv: Sequence[str]) -> list[str]:
    """The command with secret values replaced by MASK; names and everything else kept."""
    result: list[str] = []
    mask_next = False
    for arg in argv:
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
