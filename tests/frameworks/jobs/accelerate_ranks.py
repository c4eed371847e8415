"""One line per process from an `accelerate launch`ed script on the CPU: how many started.

Writes $RUNJOB_RESULTS/ranks.jsonl, one row per process (rank, world size, distributed type),
after an all-reduce that needs every process."""

import json
import os

import torch
import torch.distributed as dist
from accelerate import PartialState

state = PartialState(cpu=True)
total = torch.tensor([1])
if state.num_processes > 1:
    dist.all_reduce(total)
row = {"rank": state.process_index, "world": state.num_processes, "type": str(state.distributed_type),
       "all_reduced": int(total.item())}
os.makedirs(os.environ["RUNJOB_RESULTS"], exist_ok=True)
with open(os.path.join(os.environ["RUNJOB_RESULTS"], "ranks.jsonl"), "a") as out:
    out.write(json.dumps(row) + "\n")
print(f"rank {state.process_index} of {state.num_processes} ({state.distributed_type})", flush=True)
if state.num_processes > 1:
    # Both rows written before either process tears down, and the group destroyed as PyTorch asks:
    # left to interpreter exit, gloo's teardown aborted rank 0 once on CI ("terminate called
    # without an active exception", SIGABRT) after both ranks had printed their line.
    dist.barrier()
    dist.destroy_process_group()
