"""`gpuwhy doctor`: can the frameworks here (or those of --python) use the GPU, and if not, why?

Exit codes: 0 no error-severity finding, 1 at least one, 2 usage error or bad --from file.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gpuwhy.errors import ExitCode

DEFAULT_TIMEOUT_S = 15.0
"""Default deadline for all probes together: doctor answers within 20 s even when one hangs."""


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"must be between 0 and 3600 seconds: {text!r}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="check whether TensorFlow, PyTorch and JAX can use the GPU, and why not",
        description=(
            "Check the NVIDIA driver, the GPUs, the environment variables and the installed"
            " TensorFlow, PyTorch and JAX builds; report what stops them from using the GPU,"
            " with the fix for this machine."
        ),
        epilog="exit codes: 0 no errors found, 1 errors found, 2 usage error or bad file",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--python",
        metavar="PATH",
        help="the interpreter whose frameworks to check (default: the one running gpuwhy)",
    )
    source.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="re-run the rules on facts saved with --save instead of probing this machine",
    )
    parser.add_argument(
        "--json", action="store_true", help='print {"schema_version", "facts", "findings"} as JSON'
    )
    parser.add_argument("--save", metavar="FILE", help="write the facts to FILE (for a bug report)")
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=None,
        metavar="S",
        help=f"deadline for all probes in seconds (default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from gpuwhy.env import collect_facts, evaluate, load_facts, save_facts, verdicts
    from gpuwhy.env.probe_cache import ProbeCache, default_cache_dir
    from gpuwhy.errors import UsageError
    from gpuwhy.model import JSON_SCHEMA_VERSION, Severity

    if args.from_file is not None:
        if args.timeout is not None:
            raise UsageError("--timeout has no effect with --from", "drop one of them")
        facts = load_facts(args.from_file)
    else:
        timeout = args.timeout if args.timeout is not None else DEFAULT_TIMEOUT_S
        # The doctor always probes afresh, and refreshes what `gpuwhy run` reuses.
        cache = ProbeCache(default_cache_dir())
        facts = collect_facts(args.python, timeout_s=timeout, cache=cache, reuse_cached=False)
    if args.save is not None:
        save_facts(facts, args.save)
    findings = evaluate(facts)
    lines = verdicts(facts, findings)
    if args.json:
        document = {
            "schema_version": JSON_SCHEMA_VERSION,
            "facts": facts,
            "findings": [finding.to_dict() for finding in findings],
            "verdicts": lines,
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        from rich.console import Console

        from gpuwhy.report.doctor import render_doctor

        render_doctor(facts, findings, lines, Console(highlight=False, soft_wrap=True))
    if any(finding.severity is Severity.ERROR for finding in findings):
        return int(ExitCode.PROBLEMS)
    return int(ExitCode.OK)
