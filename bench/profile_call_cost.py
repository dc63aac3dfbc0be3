"""What a profile function's call costs among a training step's work, against the tight loop of
C calls that gpuwhy's legacy generator watch calibrates it by (hooks/legacy_generator.py).

Before Python 3.12 a plain loop's generator is timed by a profile function on the loop's
thread, kept where its calls cost at most 1 % of a step. The trial counts the calls of a step
and measures one call in a tight loop; a call among a real step's work (gpuwhy's own hooks in
the step included) costs more, by ``IN_STEP_FACTOR``. This measures that factor on two loops
that read a generator: PyTorch (this interpreter) and JAX (the Python 3.10 test environment,
where scripts/test-envs.sh made it), each with gpuwhy's hooks installed in-process (the watch
itself never kept: its budget is 0, so the bench's own profile function is the only one).

Each loop alternates blocks of 5 steps with a profile function shaped as the watch (one code
test a call) and without, 40 blocks each, and takes each step's CPU time on its thread; then
counts the calls a step makes. In-step cost of a call = (median CPU time with − without) /
calls. Each loop runs --repeat times, a process each (the factor moves from run to run).
Results go to bench/results/profile_call_cost.md with the machine and the date.

    python bench/profile_call_cost.py [--out FILE] [--blocks 40] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import machine
from one_line_args import OneLineParser

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY310 = ROOT / ".venvs" / "py310-jax" / "bin" / "python"
RESULT = "RESULT "
READ_S = 0.002  # each batch's read: a sleep standing for storage
BLOCK = 5


def _generator_and_step(loop: str) -> tuple[Callable[[], Iterator[Any]], Callable[[Any], None]]:
    if loop == "torch":
        import torch

        torch.set_num_threads(1)
        model = torch.nn.Sequential(
            torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2)
        )
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

        def torch_batches() -> Iterator[Any]:
            while True:
                time.sleep(READ_S)
                yield torch.randn(16, 32), torch.randint(0, 2, (16,))

        def torch_step(batch: Any) -> None:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(batch[0]), batch[1]).backward()
            optimizer.step()

        return torch_batches, torch_step
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def update(w: Any, batch: Any) -> Any:
        x, y = batch
        return w - 0.01 * jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)

    state = {"w": jnp.zeros((32, 1))}
    rng = np.random.default_rng(0)

    def jax_batches() -> Iterator[Any]:
        while True:
            time.sleep(READ_S)
            yield rng.random((16, 32), dtype=np.float32), rng.random((16, 1), dtype=np.float32)

    def jax_step(batch: Any) -> None:
        state["w"] = update(state["w"], batch)

    return jax_batches, jax_step


def child(loop: str, blocks: int) -> dict[str, Any]:
    """One loop, in this process, with gpuwhy's hooks installed and its watch never kept."""
    from gpuwhy.hooks import auto, emitter, legacy_generator

    emitter.configure(lambda records: None)
    legacy_generator.BUDGET = 0.0
    __import__(loop)  # the framework first, then its hooks, then the step they wrap
    auto.install({})
    batches, step = _generator_and_step(loop)
    code = batches.__code__

    def watch(frame: Any, event: str, arg: Any) -> None:  # the watch's shape
        if frame.f_code is not code:
            return

    calls = [0]

    def count(frame: Any, event: str, arg: Any) -> None:
        calls[0] += 1

    source = batches()
    for _ in range(20):  # warm-up; gpuwhy's search and trial run (and remove theirs) here
        step(next(source))
    cpu: dict[bool, list[int]] = {True: [], False: []}
    for block in range(2 * blocks):
        on = block % 2 == 1
        sys.setprofile(watch if on else None)
        for _ in range(BLOCK):
            start = time.thread_time_ns()
            step(next(source))
            cpu[on].append(time.thread_time_ns() - start)
        sys.setprofile(None)
    sys.setprofile(count)
    for _ in range(10):
        step(next(source))
    sys.setprofile(None)
    per_step = calls[0] / 10
    in_step_ns = (statistics.median(cpu[True]) - statistics.median(cpu[False])) / per_step
    # As the trial calibrates: twice, the lower of the two (hooks/legacy_generator.py)
    calibrated_ns = min(legacy_generator._call_ns(watch) for _ in range(2))
    return {
        "loop": loop,
        "python": ".".join(map(str, sys.version_info[:2])),
        "calls": per_step,
        "cpu_without_us": statistics.median(cpu[False]) / 1e3,
        "cpu_with_us": statistics.median(cpu[True]) / 1e3,
        "in_step_ns": in_step_ns,
        "calibrated_ns": calibrated_ns,
    }


def _run(python: Path | str, loop: str, blocks: int) -> dict[str, Any]:
    env = dict(os.environ, GPUWHY_BOOT="0", PYTHONPATH=str(ROOT / "src"))
    env.pop("GPUWHY_SOCKET", None)
    command = [str(python), __file__, "--child", loop, "--blocks", str(blocks)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"profile_call_cost.py: {loop} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1][len(RESULT) :])
    return result


def _method() -> str:
    """The docstring's paragraph on the method, on one line, less where the results go."""
    paragraph = " ".join(__doc__.split("\n\n")[2].split())
    return paragraph.split(" Results go to")[0]


def main() -> None:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "results" / "profile_call_cost.md")
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", choices=("torch", "jax"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(RESULT + json.dumps(child(args.child, args.blocks)))
        return
    loops = [(sys.executable, "torch")] + ([(str(PY310), "jax")] if PY310.exists() else [])
    rows = [_run(python, loop, args.blocks) for python, loop in loops for _ in range(args.repeat)]
    lines = [
        "# What a profile function's call costs among a step's work",
        "",
        f"- Date: {dt.date.today().isoformat()}",
        f"- Machine: {machine.describe()}",
        f"- Method: `python bench/profile_call_cost.py --blocks {args.blocks} --repeat "
        f"{args.repeat}`: " + _method(),
        "",
        "| loop | Python | calls a step | CPU µs a step without | with | in-step ns a call | "
        "calibrated ns a call | factor |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        factor = row["in_step_ns"] / row["calibrated_ns"] if row["calibrated_ns"] > 0 else 0.0
        lines.append(
            f"| {row['loop']} | {row['python']} | {row['calls']:.0f} | "
            f"{row['cpu_without_us']:.1f} | {row['cpu_with_us']:.1f} | {row['in_step_ns']:.0f} "
            f"| {row['calibrated_ns']:.0f} | {factor:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
