"""Fit the tier's tiny model (make_tiny.py) to its arithmetic sentences, so that an evaluation
of it scores above zero: a plain PyTorch loop, seconds on a CPU.

    python fit_tiny.py MODEL_DIR TRAIN_TXT OUT_DIR [--steps N]
"""

import argparse

import torch
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

parser = argparse.ArgumentParser()
parser.add_argument("model")
parser.add_argument("train")
parser.add_argument("out")
parser.add_argument("--steps", type=int, default=300)
opts = parser.parse_args()
torch.manual_seed(0)
tokenizer = PreTrainedTokenizerFast.from_pretrained(opts.model)
model = AutoModelForCausalLM.from_pretrained(opts.model)
lines = [line.strip() for line in open(opts.train) if line.strip()]
batch = tokenizer(lines, return_tensors="pt", padding=True)
labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
model.train()
for step in range(opts.steps):
    loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
print(f"final loss {loss.item():.3f} after {opts.steps} steps")
model.save_pretrained(opts.out)
tokenizer.save_pretrained(opts.out)
