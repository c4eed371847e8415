"""A training-like job for the report and dashboard tests: a loss per step, a checkpoint
after every step, and a clean stop on SIGTERM (the local backend's time limit) so the next
attempt resumes from the last step.

usage: train_job.py STEPS DELAY [--log-only]
--log-only: never call runjob's progress(); print HF Trainer style {'loss': ...} lines instead.
"""
import json
import math
import os
import signal
import sys
import time

from runjob_core.job import (RESUME_EXIT_CODE, ResultsWriter, checkpoint_saved, latest_checkpoint, on_preempt_signal, progress,
                            should_stop)

steps, delay = int(sys.argv[1]), float(sys.argv[2])
log_only = "--log-only" in sys.argv
on_preempt_signal(signum=signal.SIGTERM)
checkpoint = latest_checkpoint()
start = json.load(open(os.path.join(str(checkpoint), "state.json")))["step"] if checkpoint else 0
print(f"starting after step {start}", flush=True)
for step in range(start + 1, steps + 1):
    time.sleep(delay)
    loss = round(2.0 / math.sqrt(step), 6)
    if log_only:
        print({"loss": loss, "grad_norm": 1.0, "learning_rate": 1e-4, "epoch": round(step / steps, 4)}, flush=True)
    else:
        progress(step=step, loss=loss, reward=round(step / steps, 6))
    folder = os.path.join(os.environ["RUNJOB_CHECKPOINT_DIR"], f"step-{step}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "state.json"), "w") as handle:
        json.dump({"step": step}, handle)
    checkpoint_saved(folder, step=step)
    if should_stop():
        print(f"time limit: stopping after step {step}", flush=True)
        sys.exit(RESUME_EXIT_CODE)
with ResultsWriter("final.jsonl") as out:  # the trained model's (toy) evaluation
    out.write({"id": "final", "step": steps, "loss": round(2.0 / math.sqrt(steps), 6), "score": 1.0})
print("trained", flush=True)
