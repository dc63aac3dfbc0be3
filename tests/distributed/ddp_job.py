"""A data-parallel PyTorch job for the tests: DistributedDataParallel over `gloo`, on CPU.

Run under `torchrun --nproc-per-node N`. Each step's model work is a small network plus a
`--compute-ms` pause that stands for the step's device time: on a GPU node every rank has its
own device, and on this job's CPU-only machines N ranks computing at once would otherwise
compete for the same cores and measure that instead. Every rank reads its own shard through a
DataLoader (`num_workers=0`) whose samples take `--read-ms / BATCH` each to read, as from
storage; the rank named by `--slow-rank` reads `--slow-read-ms` per batch instead: its input
pipeline is slower than the others', and because DDP's gradient all-reduce waits for every rank,
the others wait for it at each step. `--slow-rank -1` is the balanced job.

Each rank writes `OUT/rank{RANK}.json`: the steps it ran, its training loop's wall time, and
the seconds per step after the first few (the job's own measure, the truth the tests hold
gpuwhy's figures to).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

BATCH = 16
WARMUP_STEPS = 3  # the first steps build gloo's buffers and DDP's buckets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--read-ms", type=float, default=8.0, help="per batch, every rank")
    parser.add_argument("--compute-ms", type=float, default=12.0, help="device time per step")
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--slow-read-ms", type=float, default=32.0, help="per batch")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--linger-s", type=float, default=0.0, help="stay after training")
    args = parser.parse_args()

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)  # ranks share the machine's cores, as they would share a node's
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    read_s = (args.slow_read_ms if rank == args.slow_rank else args.read_ms) / 1000 / BATCH

    torch.manual_seed(rank)
    features = torch.randn(args.steps * BATCH, 32)
    labels = (features[:, :4].sum(dim=1) > 0).long()

    class Storage(Dataset[tuple[torch.Tensor, torch.Tensor]]):
        def __len__(self) -> int:
            return len(features)

        def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
            if read_s:  # sleep(0) still yields the core: on a busy machine, for milliseconds
                time.sleep(read_s)
            return features[index], labels[index]

    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = torch.nn.CrossEntropyLoss()
    loader = DataLoader(Storage(), batch_size=BATCH)

    steps = 0
    start = time.perf_counter()
    steady_start = start
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        time.sleep(args.compute_ms / 1000)  # the device's share of the step
        loss.backward()  # DDP all-reduces the gradients here: no rank goes on before the last
        optimizer.step()
        steps += 1
        if steps == WARMUP_STEPS:
            steady_start = time.perf_counter()
    end = time.perf_counter()
    dist.barrier()
    dist.destroy_process_group()
    time.sleep(args.linger_s)  # a live metrics scrape still sees the final counts
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"rank{rank}.json").write_text(
        json.dumps(
            {
                "rank": rank,
                "pid": os.getpid(),
                "steps": steps,
                "train_s": end - start,
                "steady_step_s": (end - steady_start) / max(steps - WARMUP_STEPS, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
