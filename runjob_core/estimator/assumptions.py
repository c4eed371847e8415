"""The modelling choices behind one estimate, in words a user can check against their job.

Each line names a choice that moved the figures (attention kernel, what is sharded or
offloaded, how the loss is computed, which overheads are counted), so a surprising number
can be traced to the assumption that produced it. ``runjob estimate --json`` lists them
under ``assumptions``; the pre-flight summary and the table print them.
"""

from __future__ import annotations

from typing import Any

from runjob_core.estimator import vllm_versions


def assumptions_of(ctx: Any, kind: str, est: Any, kw: dict[str, Any]) -> tuple[str, ...]:
    """One line per deciding assumption of *est* (a MemoryEstimate) made with settings *kw*."""
    if kind == "inference":
        return tuple(_inference(est, kw))
    return tuple(_training(ctx, kind, est, kw))


def _inference(est: Any, kw: dict[str, Any]) -> list[str]:
    b = est.breakdown
    context = f"CUDA context {b.get('cuda_context_gib', 0.5):.2f} GiB per process"
    if est.engine == "vllm":
        version = kw.get("vllm_version")
        parsed = vllm_versions.parse_version(version)
        profile = (f"vLLM {version}: V0 without chunked prefill, max(max_model_len, 2048) unless given"
                   if vllm_versions.runs_v0(parsed) else "chunked prefill, vLLM V1")
        if vllm_versions.context_inside_budget(parsed):
            where = (f"vLLM {version} counts the whole device's used memory (total - free): CUDA context, cuBLAS "
                     f"and NCCL {b.get('non_torch_gib', 0.0):.2f} GiB inside the budget; only CUDA graphs "
                     f"{b.get('cuda_graphs_gib', 0.0):.2f} GiB outside it")
        else:
            where = (f"non-torch memory (NCCL, cuBLAS) {b.get('non_torch_gib', 0.0):.2f} GiB inside the budget; "
                     f"{context} and CUDA graphs {b.get('cuda_graphs_gib', 0.0):.2f} GiB outside it"
                     + ("" if version else " (vLLM >= 0.6.4; set vllm_version for older releases)"))
        return [
            f"vLLM budget = gpu_memory_utilization {kw['gpu_memory_utilization']} x {est.gpu_vram_gib:.1f} GiB; "
            "KV cache = budget - weights - profile-run peak - non-torch memory",
            f"profile run over {b.get('max_num_batched_tokens')} tokens (max_num_batched_tokens; {profile}); "
            f"its peak is the larger of one layer's transients and the sampler's buffers for "
            f"{kw['max_num_seqs']} sequences ({b.get('sampler_gib', 0.0):.2f} GiB)",
            where,
        ]
    if est.engine == "sglang":
        return [
            f"SGLang KV pool = free memory after the weights - (1 - mem_fraction_static {b.get('mem_fraction_static')}) x total",
            f"prefill chunk of {b.get('chunked_prefill_tokens')} tokens and CUDA graphs must fit outside the pool; {context}",
        ]
    lines = [
        "transformers generate: weights + a DynamicCache that grows to max_model_len x concurrency "
        "+ one forward over the whole prompt (last-position logits only); nothing reserved up front",
        f"{context}, not part of torch's peak (torch_peak_gib / reserved_gib exclude it)",
    ]
    if est.num_gpus > 1:
        lines.append(
            f"device_map='auto' over {est.num_gpus} GPUs: whole layers balanced by size, no tensor parallelism; "
            "the first GPU also holds the embedding, the last the LM head and logits; the figures are the "
            "busiest GPU's, total_all_gpus_gib sums them"
        )
    return lines


def _training(ctx: Any, kind: str, est: Any, kw: dict[str, Any]) -> list[str]:
    n, stage = est.num_gpus, kw["zero_stage"]
    lines = []
    if kw["flash_attention"]:
        lines.append("attention: flash/SDPA kernel (the seq x seq score matrix is never stored)")
    else:
        lines.append("attention: eager (each layer keeps its seq x seq scores and softmax for backward)")
    if kw["grad_checkpointing"]:
        lines.append("activation checkpointing: each layer keeps only its input; one layer is recomputed at a time")
    else:
        lines.append("no activation checkpointing: every layer keeps its activations until backward")
    lines.append({
        "standard": "loss: one fp32 cross entropy over all logits (16-bit logits, fp32 copy, fp32 log-softmax, gradient)",
        "chunked": "loss: chunked cross entropy (torchtune CEWithChunkedOutputLoss): fp32 copies one chunk of 8 at a time",
        "fused": "loss: fused linear + cross entropy: no full logits tensor",
    }[kw["loss"]] + ("; compiled: no fp32 copies of the logits, only their gradient" if kw["torch_compile"] else ""))
    shard = {0: "nothing sharded (every rank holds full model states)",
             1: "optimizer states sharded (ZeRO-1)",
             2: "optimizer states and gradients sharded, weights replicated (ZeRO-2 / FSDP SHARD_GRAD_OP)",
             3: "weights, gradients and optimizer states sharded (ZeRO-3 / FSDP FULL_SHARD)"}[stage]
    lines.append(f"{n} GPU(s): {shard}" if n > 1 else "1 GPU: no sharding")
    if stage >= 3 and (n > 1 or kw["cpu_offload"]):
        lines.append(f"ZeRO-3/FSDP: two layers' weights whole at a time (the one computed and the prefetched next): "
                     f"{est.breakdown.get('zero3_gather_gib', 0.0):.2f} GiB")
        root = est.breakdown.get("fsdp_root_gib", 0.0)
        lines.append(f"FSDP root unit (embedding, final norm, LM head) kept whole from forward to the end of backward: "
                     f"{root:.2f} GiB (fsdp_root embeddings)" if root else
                     "embedding and LM head gathered like any layer (DeepSpeed ZeRO-3, or FSDP units of their own; "
                     "set fsdp_root embeddings when FSDP auto-wraps only the decoder layers)")
    if kw["cpu_offload"]:
        lines.append("CPU offload: optimizer states, master weights and reduced gradients on the host"
                     + (", weights too (only the gathered layers on the GPU)" if stage >= 3 else "")
                     + f"; the GPU keeps about one layer's gradients before they go ({est.gradients_gib:.2f} GiB); "
                       "the optimizer steps on the CPU")
    lines.extend(_zero_buffers(kind, est, kw))
    if kind == "full_ft":
        precision = "pure 16-bit (no fp32 master copy)" if not kw["master_weights"] and kw["dtype"] != "fp32" else (
            "fp32" if kw["dtype"] == "fp32" else "mixed precision: 16-bit weights and gradients, fp32 master copy")
        lines.append(f"precision: {precision}")
    else:
        base = "NF4 base weights" if kind == "qlora" else f"frozen {kw['dtype']} base weights"
        keeps = ("4-bit layers keep their input (bitsandbytes MatMul4Bit)" if kind == "qlora" and kw["nf4_backend"] == "bnb"
                 else "frozen layers keep no input")
        lines.append(f"{base}; {keeps}; rank-{kw['lora_rank']} adapters in {kw['lora_dtype']}")
    opt = f"optimizer {kw['optimizer']}"
    if kw["optimizer_in_bwd"] and kind == "full_ft":
        opt += (f"; stepped inside backward (optimizer_in_bwd): no whole-model gradient buffer, only the largest "
                f"parameter's gradient is whole at once ({est.gradients_gib:.2f} GiB)")
    elif kw["optimizer_in_bwd"]:
        opt += "; stepped inside backward (optimizer_in_bwd): the adapters' gradients are counted whole (an upper bound)"
    lines.append(opt)
    lines.append(f"overheads: CUDA context {est.breakdown.get('cuda_context_gib', 0.5):.2f} GiB "
                 "+ 5% caching-allocator slack on top of torch's peak")
    return lines


def _zero_buffers(kind: str, est: Any, kw: dict[str, Any]) -> list[str]:
    """The ZeRO-0/1/2 terms of :mod:`runjob_core.estimator.zero_buffers`, when they apply."""
    stage, lines = kw["zero_stage"], []
    if est.breakdown.get("reduce_bucket_gib"):
        lines.append(f"ZeRO-{stage} reduce bucket: {est.breakdown['reduce_bucket_gib']:.2f} GiB of 16-bit gradients "
                     "allocated for backward (DeepSpeed reduce_bucket_size 5e8 elements, its default)")
    master = kind == "full_ft" and kw["dtype"] != "fp32" and kw["master_weights"]
    if master and stage <= 2 and not kw["cpu_offload"] and not kw["optimizer_in_bwd"]:
        per = ("an fp32 copy of every gradient and their flat concatenation (FP16_Optimizer)" if stage == 0 else
               "a flat 16-bit copy of the rank's gradient partition and its fp32 cast")
        lines.append(f"optimizer step: the 16-bit gradients are cast to fp32 for the master copy first: {per}, "
                     f"then the optimizer's own temporaries (DeepSpeed's code): "
                     f"{est.breakdown['optimizer_step_temporaries_gib']:.2f} GiB at the step")
    return lines
