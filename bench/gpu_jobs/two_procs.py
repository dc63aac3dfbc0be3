"""Two processes sharing one GPU: this launcher starts two copies of the healthy control at
once (as two jobs on one card, or a misconfigured launcher, would), so each gets about half the
GPU. Fixed: one copy alone. Each child writes its own truth; this one gathers them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import jobkit

HEALTHY = Path(__file__).resolve().parent / "healthy.py"


def main() -> None:
    job = jobkit.start(__doc__)
    copies = 1 if job.fixed else 2
    size = "tiny" if job.tiny else "gpu"
    with tempfile.TemporaryDirectory() as folder, job.phase("train"):
        truths = [Path(folder, f"child-{i}.json") for i in range(copies)]
        children = [
            subprocess.Popen([sys.executable, str(HEALTHY), "--size", size, "--truth", str(truth)])
            for truth in truths
        ]
        codes = [child.wait() for child in children]
        found = [json.loads(t.read_text()) for t in truths if t.exists()]
    job.facts.update(copies=copies, child_exit_codes=codes, children=found)
    job.write()
    sys.exit(max(codes))


if __name__ == "__main__":
    main()
