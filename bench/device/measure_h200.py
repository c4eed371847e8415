"""Measure training and generation rates and peak GPU memory on a real GPU (one prepared run).

Run on a machine with a CUDA GPU, PyTorch and transformers (peft for the LoRA cases):

    python3 bench/device/measure_h200.py OUT_DIR

Each case builds a Llama-shaped model from its config (random weights, bf16, SDPA attention: nothing is
downloaded), runs warm-up steps, then times steps with torch.cuda.synchronize() around them, and records
tokens/s, seconds per step and the peak memory three ways (torch's max allocated, max reserved, and
nvidia-smi's used memory sampled during the case). A case that fails (an OOM, a missing package) is
recorded with its error and the run goes on: a measurement run reports what happened to every case.

These numbers are measurements of one machine, recorded with their settings; the estimators' held-out sets
may cite them, and no estimator constant may be fitted to them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import torch

# name: (hidden, layers, heads, kv_heads, intermediate, vocab) -- shapes of public Llama-family configs
SHAPES = {
    "llama-0.4b": (1024, 24, 16, 16, 2816, 32000),
    "tinyllama-1.1b": (2048, 22, 32, 4, 5632, 32000),
    "llama-3.2-3b": (3072, 28, 24, 8, 8192, 128256),
    "llama-3.1-8b": (4096, 32, 32, 8, 14336, 128256),
}

TRAIN_CASES = [
    # (shape, mode, micro_batch, seq_len, gradient_checkpointing)
    ("llama-0.4b", "full", 8, 2048, False),
    ("tinyllama-1.1b", "full", 4, 2048, False),
    ("llama-3.2-3b", "full", 4, 2048, True),
    ("llama-3.1-8b", "lora", 4, 4096, True),
    ("tinyllama-1.1b", "lora", 8, 2048, False),
]

GENERATE_CASES = [
    # (shape, batch, prompt_tokens, new_tokens)
    ("tinyllama-1.1b", 1, 128, 128),
    ("tinyllama-1.1b", 8, 128, 128),
    ("tinyllama-1.1b", 32, 128, 128),
    ("llama-3.1-8b", 1, 512, 128),
    ("llama-3.1-8b", 16, 512, 128),
]


class SmiSampler:
    """nvidia-smi's used memory (MiB) and utilisation, sampled every 0.2 s while a case runs."""

    def __init__(self) -> None:
        self.peak_mib = 0
        self.util: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=memory.used,utilization.gpu", "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=10,
            ).stdout.split("\n")[0]
            used, util = (int(x.strip()) for x in out.split(","))
            self.peak_mib = max(self.peak_mib, used)
            self.util.append(util)
            self._stop.wait(0.2)

    def __enter__(self) -> "SmiSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def build(shape: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden, layers, heads, kv, inter, vocab = SHAPES[shape]
    config = LlamaConfig(
        hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
        intermediate_size=inter, vocab_size=vocab, max_position_embeddings=8192, tie_word_embeddings=False,
        attn_implementation="sdpa",
    )
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # built in bf16 directly: no fp32 copy counts in the peak
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model


def params_of(model) -> int:
    return sum(p.numel() for p in model.parameters())


def reset() -> None:
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def memory_record(smi: SmiSampler) -> dict:
    return {
        "torch_max_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3),
        "torch_max_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 3),
        "nvidia_smi_peak_used_gib": round(smi.peak_mib / 1024, 3),
        "mean_gpu_util_percent": round(sum(smi.util) / max(len(smi.util), 1), 1),
    }


def train_case(shape: str, mode: str, micro_batch: int, seq_len: int, checkpointing: bool) -> dict:
    reset()
    with SmiSampler() as smi:
        model = build(shape)
        total_params = params_of(model)
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
        if mode == "lora":
            from peft import LoraConfig, get_peft_model

            lora = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=[
                "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
            model = get_peft_model(model, lora)
            if checkpointing:
                model.enable_input_require_grads()
        trainable = [p for p in model.parameters() if p.requires_grad]
        # bf16 parameters with AdamW states in the parameters' dtype (torch's default for bf16 params)
        optimizer = torch.optim.AdamW(trainable, lr=1e-5, fused=True)
        model.train()
        batch = torch.randint(0, SHAPES[shape][5], (micro_batch, seq_len), device="cuda")

        def step() -> None:
            loss = model(input_ids=batch, labels=batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        for _ in range(3):
            step()
        torch.cuda.synchronize()
        steps = 8
        start = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
    per_step = elapsed / steps
    record = {
        "kind": "training", "shape": shape, "config": dict(zip(
            ["hidden", "layers", "heads", "kv_heads", "intermediate", "vocab"], SHAPES[shape])),
        "params": total_params, "trainable_params": sum(p.numel() for p in trainable), "mode": mode,
        "micro_batch": micro_batch, "seq_len": seq_len, "gradient_checkpointing": checkpointing,
        "optimizer": "torch AdamW fused, states in bf16 (parameter dtype)", "dtype": "bfloat16",
        "attention": "sdpa", "framework": "transformers model + plain PyTorch loop (no Trainer)",
        "seconds_per_step": round(per_step, 4),
        "tokens_per_s": round(micro_batch * seq_len / per_step, 1),
        "timed_steps": steps,
    }
    record.update(memory_record(smi))
    del model, optimizer
    return record


def generate_case(shape: str, batch: int, prompt_tokens: int, new_tokens: int) -> dict:
    reset()
    with SmiSampler() as smi:
        model = build(shape)
        model.eval()
        prompt = torch.randint(100, SHAPES[shape][5], (batch, prompt_tokens), device="cuda")
        mask = torch.ones_like(prompt)
        kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                      attention_mask=mask, pad_token_id=0)
        with torch.no_grad():
            model.generate(prompt, **dict(kwargs, max_new_tokens=8, min_new_tokens=8))
            torch.cuda.synchronize()
            start = time.perf_counter()
            out = model.generate(prompt, **kwargs)
            torch.cuda.synchronize()
            elapsed = time.perf_counter() - start
    generated = (out.shape[1] - prompt_tokens) * batch
    record = {
        "kind": "inference", "engine": "transformers generate (greedy, KV cache, sdpa, no compile)",
        "shape": shape, "params": params_of(model), "batch": batch, "prompt_tokens": prompt_tokens,
        "new_tokens": new_tokens, "dtype": "bfloat16", "seconds": round(elapsed, 3),
        "generated_tokens_per_s": round(generated / elapsed, 1),
        "ms_per_decode_step": round(1000 * elapsed / new_tokens, 2),
    }
    record.update(memory_record(smi))
    del model
    return record


def main() -> None:
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    import transformers

    env = {
        "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "transformers": transformers.__version__, "cuda": torch.version.cuda,
        "card_memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 2),
    }
    try:
        import peft
        env["peft"] = peft.__version__
    except ImportError as exc:
        env["peft"] = f"missing: {exc}"
    print(json.dumps(env), flush=True)
    results = []
    deadline = time.monotonic() + float(os.environ.get("MEASURE_BUDGET_S", "270"))
    for kind, cases, run in (("training", TRAIN_CASES, train_case), ("inference", GENERATE_CASES, generate_case)):
        for case in cases:
            if time.monotonic() > deadline:
                results.append({"kind": kind, "case": list(case), "skipped": "time budget of the run spent"})
                continue
            started = time.monotonic()
            try:
                record = run(*case)
            except (torch.cuda.OutOfMemoryError, RuntimeError, ImportError, ValueError) as exc:
                # A measurement run records each case's outcome, failures included, and goes on.
                record = {"kind": kind, "case": list(case), "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            record["wall_s"] = round(time.monotonic() - started, 1)
            results.append(record)
            print(json.dumps(record), flush=True)
            torch.cuda.empty_cache()
    with open(os.path.join(out_dir, "rates.json"), "w") as f:
        json.dump({"environment": env, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
