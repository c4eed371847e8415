"""``runjob estimate``: GPU memory pre-flight for a model, a job kind and a GPU type.

Module imports stay light (click only) so the CLI starts fast; the estimator and rich are
imported inside the command.
"""

from __future__ import annotations

import json

import click


@click.command("estimate")
@click.option("--model", "model", required=True, metavar="PATH_OR_NAME",
              help="Local folder/file with a config.json, a repo id in the Hugging Face cache, or a built-in table name.")
@click.option("--kind", type=click.Choice(["inference", "full_ft", "lora", "qlora"]), required=True,
              help="inference (vLLM), full_ft, lora or qlora.")
@click.option("--gpu", required=True, metavar="NAME", help="GPU type, e.g. H100, A100-80GB, A100-40GB, L40S, RTX-4090.")
@click.option("--num-gpus", type=click.IntRange(min=1), default=1, show_default=True, help="GPUs of the job.")
@click.option("--tp", type=click.IntRange(min=1), default=None, help="Tensor parallel size (inference; default: --num-gpus).")
@click.option("--dtype", type=click.Choice(["bf16", "fp16", "fp32", "fp8", "int4"]), default="bf16", show_default=True)
@click.option("--max-model-len", type=click.IntRange(min=1), default=None,
              help="vLLM max_model_len (default: the model's max_position_embeddings).")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True,
              help="Concurrent sequences of max_model_len the KV cache must hold.")
@click.option("--seq-len", type=click.IntRange(min=1), default=2048, show_default=True, help="Training sequence length.")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="Per-GPU training micro-batch.")
@click.option("--zero-stage", type=click.IntRange(0, 3), default=0, show_default=True,
              help="ZeRO stage / FSDP sharding (3 = FULL_SHARD).")
@click.option("--grad-checkpointing", is_flag=True, default=False, help="Activation (gradient) checkpointing.")
@click.option("--gpu-memory-utilization", type=click.FloatRange(0, 1, min_open=True), default=0.9, show_default=True,
              help="vLLM gpu_memory_utilization.")
@click.option("--engine", type=click.Choice(["vllm", "hf", "sglang"]), default="vllm", show_default=True,
              help="Inference engine: vllm (reserves its budget up front), hf (transformers generate), sglang.")
@click.option("--enforce-eager", is_flag=True, default=False, help="vLLM/SGLang without CUDA graphs.")
@click.option("--max-num-batched-tokens", type=click.IntRange(min=1), default=None,
              help="vLLM profile size (default 16384 on >= 70 GiB GPUs, else 8192); SGLang chunked prefill.")
@click.option("--max-num-seqs", type=click.IntRange(min=1), default=256, show_default=True, help="vLLM max_num_seqs.")
@click.option("--mem-fraction-static", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="SGLang mem_fraction_static (default 0.85).")
@click.option("--kv-cache-dtype", type=click.Choice(["auto", "fp8", "bf16", "fp16", "fp32"]), default="auto", show_default=True)
@click.option("--optimizer", type=click.Choice(["adamw", "adamw_fused", "adamw_single", "adamw8bit", "paged_adamw", "paged_adamw8bit",
                                                "adafactor", "sgd"]), default="adamw", show_default=True)
@click.option("--pure-bf16", is_flag=True, default=False,
              help="Training without fp32 master weights (optimizer states in bf16 too).")
@click.option("--cpu-offload", is_flag=True, default=False,
              help="ZeRO-Offload / FSDP CPU offload: optimizer states and master weights on the host (weights too with --zero-stage 3).")
@click.option("--lora-rank", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--lora-targets", default=None, metavar="A,B,...",
              help="LoRA target modules, comma-separated (default: every linear layer, in the architecture's names).")
@click.option("--optimizer-in-bwd", is_flag=True, default=False,
              help="Optimizer step fused into backward (torchtune optimizer_in_bwd): no whole-model gradient buffer.")
@click.option("--loss", type=click.Choice(["standard", "chunked", "fused"]), default="standard", show_default=True,
              help="Cross entropy over all logits, torchtune's chunked one, or a fused linear + cross entropy.")
@click.option("--nf4-backend", type=click.Choice(["bnb", "torchao"]), default="bnb", show_default=True,
              help="QLoRA 4-bit base: bitsandbytes (HF/PEFT; time x0.6 of LoRA) or torchao (torchtune; its "
                   "dequantisation counted in HBM bytes, far fewer under --compile).")
@click.option("--hf-prompt-logits", type=click.Choice(["last", "all"]), default="last", show_default=True,
              help="engine hf: prefill logits of the last position (transformers >= 4.45) or of all positions (older).")
@click.option("--vllm-version", default=None, metavar="X.Y.Z",
              help="engine vllm: the release (before 0.6.4 the CUDA context counts inside gpu_memory_utilization; "
                   "before 0.8 the profile run is max(max_model_len, 2048) tokens). Default: a current release.")
@click.option("--fsdp-root", type=click.Choice(["sharded", "embeddings"]), default="sharded", show_default=True,
              help="--zero-stage 3 over GPUs/offloaded: 'embeddings' when FSDP auto-wraps the decoder layers (HF Trainer/"
                   "accelerate TRANSFORMER_BASED_WRAP), so the root unit keeps embedding and LM head whole through backward.")
@click.option("--compile", "torch_compile", is_flag=True, default=False,
              help="Training under torch.compile (torchtune compile: True): the loss keeps no fp32 copies of the "
                   "logits, and the time model counts compile's speedup (x1.19; not for megatron/nemo/unsloth or FP8).")
@click.option("--steps", type=click.IntRange(min=1), default=None, help="Training: optimizer steps (work = steps x global batch x seq len).")
@click.option("--grad-accum", type=click.IntRange(min=1), default=1, show_default=True, help="Training: micro-batches per step.")
@click.option("--train-tokens", type=click.IntRange(min=1), default=None, help="Training: tokens to train on (instead of --steps).")
@click.option("--framework", type=click.Choice(["hf", "trl", "axolotl", "llamafactory", "unsloth", "deepspeed", "fsdp",
                                                "torchtitan", "megatron", "nemo"]), default="hf", show_default=True,
              help="Training framework (its achieved fraction of peak is a stated prior).")
@click.option("--fp8", is_flag=True, default=False, help="Training in FP8 (Transformer Engine) on GPUs that have it.")
@click.option("--rows", type=click.IntRange(min=1), default=None, help="Inference: prompts to generate for.")
@click.option("--input-tokens", type=click.IntRange(min=1), default=512, show_default=True, help="Inference: mean prompt tokens.")
@click.option("--output-tokens", type=click.IntRange(min=1), default=512, show_default=True, help="Inference: mean generated tokens.")
@click.option("--transformers-version", default=None, metavar="X.Y.Z",
              help="engine hf: the release (before 4.52, 4.53 for Qwen3-MoE, a MoE layer loops over every expert in "
                   "Python). Default: a current release.")
@click.option("--time-limit", default=None, metavar="D-HH:MM:SS", help="Time limit: how many resume segments the work needs.")
@click.option("--json", "as_json", is_flag=True, default=False, help="Print one JSON object.")
def command(
    model: str,
    kind: str,
    gpu: str,
    num_gpus: int,
    tp: int | None,
    dtype: str,
    max_model_len: int | None,
    concurrency: int,
    seq_len: int,
    batch: int,
    zero_stage: int,
    grad_checkpointing: bool,
    gpu_memory_utilization: float,
    engine: str,
    enforce_eager: bool,
    max_num_batched_tokens: int | None,
    max_num_seqs: int,
    mem_fraction_static: float | None,
    kv_cache_dtype: str,
    optimizer: str,
    pure_bf16: bool,
    cpu_offload: bool,
    lora_rank: int,
    lora_targets: str | None,
    optimizer_in_bwd: bool,
    loss: str,
    nf4_backend: str,
    fsdp_root: str,
    hf_prompt_logits: str,
    vllm_version: str | None,
    torch_compile: bool,
    steps: int | None,
    grad_accum: int,
    train_tokens: int | None,
    framework: str,
    fp8: bool,
    rows: int | None,
    input_tokens: int,
    output_tokens: int,
    transformers_version: str | None,
    time_limit: str | None,
    as_json: bool,
) -> None:
    """Estimate peak GPU memory per GPU and whether the job fits, and how long it runs.

    The verdict is data: the exit code is 0 whether it fits or not. An unknown model or GPU
    is an error (exit 1). The time line (``time`` in --json) is the first-principles rate, or
    the rate an earlier run with the same settings achieved here; with --steps/--train-tokens
    (training) or --rows (inference) it adds the total, and with --time-limit the segments.
    """
    from runjob_core.estimator import estimate

    targets = [t.strip() for t in lora_targets.split(",") if t.strip()] if lora_targets else None
    est = estimate(
        model,
        kind,
        gpu,
        num_gpus=num_gpus,
        tp=tp,
        dtype=dtype,
        max_model_len=max_model_len,
        concurrency=concurrency,
        seq_len=seq_len,
        batch=batch,
        zero_stage=zero_stage,
        grad_checkpointing=grad_checkpointing,
        gpu_memory_utilization=gpu_memory_utilization,
        engine=engine,
        enforce_eager=enforce_eager,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        mem_fraction_static=mem_fraction_static,
        kv_cache_dtype=kv_cache_dtype,
        optimizer=optimizer,
        master_weights=not pure_bf16,
        cpu_offload=cpu_offload,
        lora_rank=lora_rank,
        lora_targets=targets,
        optimizer_in_bwd=optimizer_in_bwd,
        loss=loss,
        nf4_backend=nf4_backend,
        fsdp_root=fsdp_root,
        hf_prompt_logits=hf_prompt_logits,
        vllm_version=vllm_version,
        torch_compile=torch_compile,
    )
    seen, rate, calibrated = _measured(est, framework)
    from runjob_core.cli._estimate_time import time_for

    time = time_for(est, model, kind=kind, steps=steps, grad_accum=grad_accum, train_tokens=train_tokens,
                    framework=framework, fp8=fp8, rows=rows, input_tokens=input_tokens, output_tokens=output_tokens,
                    time_limit=time_limit, measured=rate, transformers_version=transformers_version,
                    calibrated=calibrated)
    if as_json:
        data = est.to_json()
        if seen:
            data["measured"] = seen
        data["time"] = time
        click.echo(json.dumps(data, sort_keys=False))
        return
    _print_table(est)
    if seen:
        from runjob_core.estimator.measured import describe

        click.echo(describe(seen))
    from runjob_core.estimator.time_job import line

    click.echo("time: " + line(time, work_hint="give --steps, --train-tokens or --rows"))


def _measured(est, framework: str):  # noqa: ANN001, ANN202 - MemoryEstimate, imported lazily
    """Memory and rate of an earlier run of the same model and settings in this folder's state store,
    and, without such a rate, the calibration the user's other runs on this GPU type give."""
    from runjob_core import store as store_mod

    path = store_mod.state_dir() / "state.db"
    if not path.is_file():
        return None, None, None
    from runjob_core.estimator import rates
    from runjob_core.estimator.measured import lookup

    store = store_mod.Store(path)
    try:
        found = rates.records(store)
        rate = rates.lookup(store, est, found=found)
        return lookup(store, est), rate, (rates.calibration(store, est, framework, found=found) if rate is None else None)
    finally:
        store.close()


def _print_table(est) -> None:  # noqa: ANN001 - MemoryEstimate, imported lazily
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    title = (
        f"{est.model} - {est.kind}{f' ({est.engine})' if est.kind == 'inference' else ''} on {est.num_gpus} x {est.gpu} "
        f"({est.gpu_vram_gib:.2f} GiB each)"
        f", {est.dtype}"
    )
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("component (per GPU)")
    table.add_column("GiB", justify="right")
    table.add_column("detail")
    p = est.params_total
    table.add_row("parameters", "", f"{p / 1e9:.2f}B total, {est.params_active / 1e9:.2f}B active"
                  + (f", {est.params_trainable / 1e6:.1f}M trainable" if est.params_trainable else ""))
    table.add_row("weights", f"{est.weights_gib:.2f}", f"tp={est.tp}" if est.kind == "inference" else "")
    if est.kind == "inference":
        b = est.breakdown
        what = {"vllm": f"profile over {b.get('max_num_batched_tokens')} batched tokens",
                "hf": f"one forward pass over {b.get('prompt_tokens')} tokens",
                "sglang": f"a {b.get('chunked_prefill_tokens')}-token prefill chunk"}[est.engine]
        table.add_row("activation peak", f"{est.activations_gib:.2f}", what)
        table.add_row("KV cache (requested)", f"{est.kv_cache_gib:.2f}",
                      f"{est.kv_bytes_per_token:,.0f} B/token for the whole model")
        if "kv_available_gib" in b:
            table.add_row("KV cache (available)", f"{b['kv_available_gib']:.2f}",
                          f"{est.kv_capacity_tokens:,} tokens = {est.max_concurrency:g} x {est.max_model_len}")
        table.add_row("non-torch + graphs + context", f"{est.overhead_gib:.2f}", "")
        if "vllm_budget_gib" in b:
            table.add_row("vLLM budget", f"{b['vllm_budget_gib']:.2f}", "gpu_memory_utilization x total")
        elif "mem_fraction_static" in b:
            table.add_row("SGLang static pool", f"{b['kv_available_gib']:.2f}", f"mem_fraction_static {b['mem_fraction_static']}")
    else:
        table.add_row("gradients", f"{est.gradients_gib:.2f}", "")
        table.add_row("optimizer states", f"{est.optimizer_gib:.2f}", est.settings.get("optimizer", ""))
        if est.offloaded_gib:
            table.add_row("offloaded to host", f"({est.offloaded_gib:.2f})", "not on the GPU")
        if est.paged_gib:
            table.add_row("paged optimizer states", f"({est.paged_gib:.2f})", "CUDA unified memory, evictable")
        table.add_row("activations", f"{est.activations_gib:.2f}", f"{est.breakdown['tokens_per_gpu']} tokens")
        table.add_row("overhead", f"{est.overhead_gib:.2f}", "CUDA context + allocator slack")
    table.add_row("total (peak)", f"{est.total_gib:.2f}", "", style="bold")
    console.print(table)
    if est.fits:
        console.print(f"[bold green]fits[/]: {est.headroom_gib:.2f} GiB headroom per GPU")
    else:
        console.print(f"[bold red]does not fit[/]: {-est.headroom_gib:.2f} GiB short per GPU")
    for line in est.assumptions:
        console.print(f"assumes: {line}")
    if est.breakdown.get("max_seq_len_that_fits") is not None:
        console.print(f"longest seq_len that fits at batch {est.settings.get('batch')}: {est.breakdown['max_seq_len_that_fits']:,} tokens")
    for n in est.notes:
        console.print(f"note: {n}")
    for s in est.suggestions:
        console.print(f"suggestion: {s}")
