"""torchrun workers where one rank fails: rank FAIL_RANK raises after some steps, while its
progress bar is still on the line (tqdm without a newline), as real jobs do.

    torchrun --nproc_per_node 2 fail_rank.py [--fail-rank 1] [--steps 20]
"""

import argparse
import time

import torch
import torch.distributed as dist
from tqdm import tqdm

parser = argparse.ArgumentParser()
parser.add_argument("--fail-rank", type=int, default=1)
parser.add_argument("--steps", type=int, default=20)
opts = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
values = torch.ones(4)
for step in tqdm(range(opts.steps), disable=rank != opts.fail_rank):
    if rank == opts.fail_rank and step == opts.steps // 2:
        raise ValueError(f"bad batch at step {step} on rank {rank}: token id 50257 is out of range")
    dist.all_reduce(values)
    time.sleep(0.05)
dist.destroy_process_group()
print(f"rank {rank} done", flush=True)
