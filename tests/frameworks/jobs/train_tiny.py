"""A Trainer job as a user writes it, on the tier's tiny model (make_tiny.py).

    python train_tiny.py MODEL_DIR TRAIN_TXT --max-steps N --save-steps K [--callback] [--step-seconds S]
                         [--slow-attempts A]

Checkpoints go to $RUNJOB_CHECKPOINT_DIR (Trainer's checkpoint-N folders), a resume starts
from $RUNJOB_RESUME_FROM, and the end writes $RUNJOB_RESULTS/summary.json. --step-seconds
slows each batch (a slow data loader) in the first A attempts (all when not given), so that a
short time limit lands mid-training there whatever the machine's speed, and later attempts finish.
"""

import argparse
import json
import os
import time

from datasets import Dataset
from transformers import (AutoModelForCausalLM, DataCollatorForLanguageModeling, PreTrainedTokenizerFast, Trainer,
                          TrainingArguments)

parser = argparse.ArgumentParser()
parser.add_argument("model")
parser.add_argument("train")
parser.add_argument("--max-steps", type=int, required=True)
parser.add_argument("--save-steps", type=int, required=True)
parser.add_argument("--callback", action="store_true")
parser.add_argument("--step-seconds", type=float, default=0.0)
parser.add_argument("--slow-attempts", type=int, default=None)
opts = parser.parse_args()
attempt = int(os.environ.get("RUNJOB_ATTEMPT", "1"))
if opts.slow_attempts is not None and attempt > opts.slow_attempts:
    opts.step_seconds = 0.0

tokenizer = PreTrainedTokenizerFast.from_pretrained(opts.model)
model = AutoModelForCausalLM.from_pretrained(opts.model)
lines = open(opts.train).read().splitlines()
data = Dataset.from_dict({"text": lines}).map(lambda row: tokenizer(row["text"]), remove_columns=["text"])
collate = DataCollatorForLanguageModeling(tokenizer, mlm=False)


def slow_collate(rows):
    time.sleep(opts.step_seconds)
    return collate(rows)


args = TrainingArguments(output_dir=os.environ["RUNJOB_CHECKPOINT_DIR"], max_steps=opts.max_steps,
                         save_steps=opts.save_steps, logging_steps=10, per_device_train_batch_size=8,
                         learning_rate=1e-3, report_to=[], use_cpu=True, dataloader_num_workers=0, seed=0)
callbacks = []
if opts.callback:
    from runjob_core.job.hf import RunjobCallback

    callbacks.append(RunjobCallback())
trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=slow_collate, callbacks=callbacks)
result = trainer.train(resume_from_checkpoint=os.environ.get("RUNJOB_RESUME_FROM") or None)
summary = {"global_step": trainer.state.global_step, "attempt": attempt,
           "steps_logged": [entry["step"] for entry in trainer.state.log_history if "loss" in entry]}
os.makedirs(os.environ["RUNJOB_RESULTS"], exist_ok=True)
with open(os.path.join(os.environ["RUNJOB_RESULTS"], "summary.json"), "w") as handle:
    json.dump(summary, handle)
print(f"done at step {trainer.state.global_step}", flush=True)
