"""A job that takes GPU memory and then leaves the GPU idle: it allocates a few GiB, trains for
a moment, then spends seconds on host-side work (writing results, a long evaluation on the CPU)
while still holding the memory, which other jobs on the card cannot use. Fixed: the memory is
released (`del`, `torch.cuda.empty_cache()`) before the host-side work.
"""

from __future__ import annotations

import time

import jobkit


def main() -> None:
    job = jobkit.start(__doc__)
    import torch

    device = jobkit.torch_device(job)
    gib, idle_s = job.size((8, 4.0), (0.0625, 0.5))
    held = torch.empty(int(gib * 2**30), dtype=torch.uint8, device=device)
    with job.phase("train"):
        weight = torch.randn(1024, 1024, device=device)
        for _ in range(50):
            weight = torch.tanh(weight @ weight)
    if job.fixed:
        del held, weight
        if device == "cuda":
            torch.cuda.empty_cache()
    reserved = torch.cuda.memory_reserved() if device == "cuda" else 0
    with job.phase("idle"):
        deadline = time.perf_counter() + idle_s
        while time.perf_counter() < deadline:
            sum(i * i for i in range(10_000))  # host-side work, the GPU untouched
    job.facts.update(allocated_gib=gib, reserved_during_idle_bytes=reserved, idle_s=idle_s)
    job.write()


if __name__ == "__main__":
    main()
