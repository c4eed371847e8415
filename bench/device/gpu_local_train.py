"""A short real training job for bench/device/gpu_local_check.sh: a small MLP regression trained
with AdamW on the GPU runjob gave the job (CUDA_VISIBLE_DEVICES), in three phases:

1. busy: training steps for BUSY_S seconds (at least MIN_STEPS steps);
2. stalled: IDLE_S seconds of sleep with the model on the GPU (a data loader that stopped):
   the GPU sits at 0% utilisation and runjob's idle-GPU finding should fire;
3. a few more steps, then the peak memory torch saw.

Without torch (this repo's CI machines) the same phases run as a pure-Python loop, so the
script and runjob's flow are checked everywhere; the figures only mean something on a GPU.
"""

import os
import sys
import time

BUSY_S = float(os.environ.get("BUSY_S", "35"))
IDLE_S = float(os.environ.get("IDLE_S", "20"))
MIN_STEPS = int(os.environ.get("MIN_STEPS", "300"))


def main() -> int:
    print(f"[check] started_at={time.time():.3f}", flush=True)  # the job's own clock, for the overlap check
    try:
        return train()
    finally:
        print(f"[check] ended_at={time.time():.3f}", flush=True)


def train() -> int:
    print(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')!r} "
          f"RUNJOB_GPU_INDICES={os.environ.get('RUNJOB_GPU_INDICES', '')!r}", flush=True)
    try:
        import torch
    except ImportError:
        return cpu_stand_in()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"torch {torch.__version__} on {device}"
          + (f" ({torch.cuda.get_device_name(0)}, {torch.cuda.device_count()} visible)" if device == "cuda" else ""),
          flush=True)
    torch.manual_seed(0)
    width = 4096 if device == "cuda" else 256
    batch = 8192 if device == "cuda" else 64
    model = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(), torch.nn.Linear(2 * width, width)).to(device)
    target = torch.nn.Linear(width, width).to(device).requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step, start = 0, time.monotonic()

    def train_step() -> float:
        x = torch.randn(batch, width, device=device)
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
            loss = torch.nn.functional.mse_loss(model(x), target(x))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.item()

    while step < MIN_STEPS or time.monotonic() - start < BUSY_S:
        loss = train_step()
        step += 1
        if step % 50 == 0:
            print(f"step={step} loss={loss:.5f} elapsed={time.monotonic() - start:.1f}s", flush=True)
    print(f"[phase] stalled data loader: sleeping {IDLE_S:g} s with the model on the GPU", flush=True)
    time.sleep(IDLE_S)
    for _ in range(50):
        loss = train_step()
        step += 1
    print(f"step={step} loss={loss:.5f} (after the stall)", flush=True)
    if device == "cuda":
        torch.cuda.synchronize()
        print(f"torch.cuda.max_memory_allocated() = {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB", flush=True)
    print(f"done: {step} steps in {time.monotonic() - start:.1f} s", flush=True)
    return 0


def cpu_stand_in() -> int:
    print("torch is not installed: pure-Python stand-in of the same phases", flush=True)
    weight, step, start = 0.0, 0, time.monotonic()
    while step < MIN_STEPS or time.monotonic() - start < BUSY_S:
        for i in range(2000):
            weight -= 1e-3 * (weight - (i % 7))
        step += 1
        if step % 50 == 0:
            print(f"step={step} loss={abs(weight - 3):.5f}", flush=True)
    print(f"[phase] stalled data loader: sleeping {IDLE_S:g} s", flush=True)
    time.sleep(IDLE_S)
    print(f"done: {step} steps in {time.monotonic() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
