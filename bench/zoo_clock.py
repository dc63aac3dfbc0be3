"""Runs a script as its own `__main__` and writes how long it ran: a zoo job's own time, taken
the same way bare and under `gpuwhy run` (bench/zoo_overhead.py).

    python bench/zoo_clock.py OUT.json SCRIPT [ARGS...]

The clock starts once this interpreter is up (gpuwhy's start-up in the job's process, where it
runs, comes before) and stops when the script returns, exits or fails; framework imports, hooks
and training are inside it. The script's exit code, or its exception, is passed on. Beside the
time, the full (oldest-generation) garbage collections the process ran by then: in a short job
one collection more or less moves its time by a tenth of a second or more (bench/zoo_overhead.py).
"""

from __future__ import annotations

import gc
import json
import runpy
import sys
import time
from pathlib import Path


def main() -> None:
    if len(sys.argv) < 3:
        print("usage: python bench/zoo_clock.py OUT.json SCRIPT [ARGS...]", file=sys.stderr)
        raise SystemExit(2)
    out, script, *args = sys.argv[1:]
    sys.argv = [script, *args]
    sys.path[0] = str(Path(script).resolve().parent)  # as `python SCRIPT` would have it
    start = time.perf_counter()
    try:
        runpy.run_path(script, run_name="__main__")
    finally:  # a script that fails is timed too; its exception goes on as Python reports it
        job_s = time.perf_counter() - start
        full_gcs = gc.get_stats()[-1]["collections"]
        Path(out).write_text(json.dumps({"job_s": job_s, "full_gcs": full_gcs}))


if __name__ == "__main__":
    main()
