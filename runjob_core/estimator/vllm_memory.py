"""GPU memory of vLLM inference, following vLLM's own memory profile.

vllm/worker/worker.py ``Worker.determine_num_available_blocks`` (V0, v0.6.4-v0.8; rewritten
in PR #10511 "overhaul memory profiling") and vllm/v1/worker/gpu_worker.py
``determine_available_memory`` (V1): ``budget = total_gpu_memory * gpu_memory_utilization``;
from it vLLM subtracts the weights, the peak activation memory of a profile forward pass over
``max_num_batched_tokens`` tokens and the non-torch memory (NCCL, cuBLAS workspaces); what is
left becomes KV cache. The CUDA context and the CUDA graphs captured afterwards live outside
the budget, in the ``1 - gpu_memory_utilization`` slack (vLLM >= 0.21 also profiles CUDA graph
memory and takes it from the budget; the estimate keeps the older accounting).
``enforce_eager`` drops the graphs. Releases before 0.6.4 counted differently
(:mod:`runjob_core.estimator.vllm_versions`).
"""

from __future__ import annotations

from typing import Any

from runjob_core.errors import RunjobError
from runjob_core.estimator import vllm_versions
from runjob_core.estimator.arch import Arch, kv_bytes_per_token
from runjob_core.estimator.constants import (
    CUDA_CONTEXT_GIB,
    CUDA_GRAPHS_GIB,
    NON_TORCH_GIB_TP,
    NON_TORCH_GIB_TP1,
    VLLM_BLOCK,
)
from runjob_core.estimator.gpus import GIB, GPUSpec
from runjob_core.estimator.record import Ctx, MemoryEstimate, gib, kv_dtype_bytes, settings_of, weight_bytes


def default_batched_tokens(gpu: GPUSpec) -> int:
    """vLLM V1 default ``max_num_batched_tokens`` of the offline ``LLM`` class (chunked
    prefill on): 16384 on GPUs with >= 70 GiB, 8192 below (vllm/engine/arg_utils.py
    ``EngineArgs._set_default_args_v1``; ``vllm serve`` uses 8192/2048). vLLM V0 without
    chunked prefill profiles ``max(max_model_len, 2048)`` tokens: pass that explicitly."""
    return 16384 if gpu.total_gib >= 70 else 8192


#: Bytes per (sequence x vocabulary) element while vLLM V1's dummy sampler run profiles
#: top-k/top-p sampling (vllm/v1/worker/gpu_model_runner.py ``_dummy_sampler_run`` sets
#: both; vllm/v1/sample/ops/topk_topp_sampler.py ``apply_top_k_top_p``): the fp32 logits
#: (4), their sorted copy (4) and int64 sort indices (8), the softmax/cumsum of the sorted
#: values (4), the top-p mask (1) and the scattered result (4; later versions scatter in
#: place with ``logits.scatter_``, 21 bytes): the larger, older figure is kept.
SAMPLER_BYTES_PER_LOGIT = 25


def vllm_sampler_bytes(a: Arch, max_num_seqs: int, tokens: int) -> float:
    """Peak of the profile run's sampler over ``min(max_num_seqs, tokens)`` sequences."""
    return min(max_num_seqs, tokens) * a.vocab * SAMPLER_BYTES_PER_LOGIT


def vllm_activation_bytes(a: Arch, tokens: int, act_b: float, tp: int, max_num_seqs: int) -> float:
    """Peak of vLLM's profile forward over ``tokens`` tokens (per GPU).

    The largest live set in one decoder layer: the gate/up output (2*I/tp) and the
    act-and-mul output (I/tp) plus ~3 hidden-size buffers (residual, normed input, output),
    i.e. ``tokens * act_bytes * (3*I/tp + 3*h)``; for fused MoE the three caches of
    ``fused_moe`` (tokens*top_k*(2*I_moe, I_moe)/tp and tokens*top_k*h). Fitted to the two
    profile runs of Llama-3.1-8B in vllm#10517 (20000 and 29000 tokens: 2.07 and 2.99 GiB,
    i.e. 110 KB per token; the formula gives 110.6 KB). The sampler runs after the forward
    has freed its transients, so the profile peak is the larger of the two
    (:func:`vllm_sampler_bytes`); ``max_num_seqs`` 0 leaves the sampler out.
    """
    h = a.hidden
    dense = 3 * a.intermediate / tp
    per_tok = dense
    if a.is_moe:
        k = max(1, a.experts_per_token)
        moe = 3 * k * a.moe_intermediate / tp + k * h
        shared = a.moe_intermediate * a.n_shared_experts + a.shared_intermediate
        moe += 3 * shared / tp
        per_tok = moe if a.n_moe_layers == a.layers else max(moe, dense)
    layer = tokens * act_b * (per_tok + 3 * h)
    return max(layer, vllm_sampler_bytes(a, max_num_seqs, tokens))


def vllm_inference(ctx: Ctx, g: GPUSpec, **kw: Any) -> MemoryEstimate:
    a, counts = ctx.arch, ctx.counts
    dtype = kw["dtype"]
    num_gpus = kw["num_gpus"]
    tp = kw["tp"] or num_gpus
    if num_gpus < tp:
        num_gpus = tp
    if num_gpus % tp:
        raise RunjobError(f"num_gpus {num_gpus} is not a multiple of tp {tp}")
    if a.heads % tp:
        raise RunjobError(
            f"tp {tp} does not divide the model's {a.heads} attention heads (vLLM requires it)"
        )
    notes: list[str] = []
    max_len = kw["max_model_len"] or a.max_position or 4096
    concurrency = kw["concurrency"]
    kvb = kv_dtype_bytes(kw["kv_cache_dtype"], dtype)
    act_b = 4.0 if dtype == "fp32" else 2.0
    w_total = weight_bytes(counts, dtype)
    w = w_total / tp
    kv_tok_model = kv_bytes_per_token(a, kvb, 1)
    kv_tok = kv_bytes_per_token(a, kvb, tp)
    version = vllm_versions.parse_version(kw.get("vllm_version"))
    mnbt = (kw["max_num_batched_tokens"] or vllm_versions.v0_default_batched_tokens(version, max_len)
            or default_batched_tokens(g))
    act = vllm_activation_bytes(a, mnbt, act_b, tp, kw["max_num_seqs"])
    graphs = 0.0 if kw["enforce_eager"] else CUDA_GRAPHS_GIB * GIB
    if vllm_versions.context_inside_budget(version):
        # V0 before 0.6.4 measured ``total - free`` after the profile run: the context and
        # every non-torch allocation are inside the budget; only the graphs come after it
        tp_extra = 0.0 if tp == 1 else NON_TORCH_GIB_TP - NON_TORCH_GIB_TP1
        non_torch = (vllm_versions.V0_DEVICE_NON_TORCH_GIB_TP1 + tp_extra) * GIB
        context = 0.0
    else:
        non_torch = (NON_TORCH_GIB_TP1 if tp == 1 else NON_TORCH_GIB_TP) * GIB
        context = CUDA_CONTEXT_GIB * GIB
    vram = g.total_bytes
    budget = vram * kw["gpu_memory_utilization"]
    non_kv = w + act + non_torch
    kv_avail = budget - non_kv
    capacity = int(kv_avail // kv_tok // VLLM_BLOCK * VLLM_BLOCK) if kv_avail > 0 else 0
    requested = max_len * concurrency
    kv_req = kv_tok * requested
    slack_ok = context + budget + graphs <= vram
    fits = capacity >= requested and slack_ok
    headroom = kv_avail - kv_req
    if not slack_ok:
        headroom = min(headroom, vram - (context + budget + graphs))
        notes.append(
            f"gpu_memory_utilization {kw['gpu_memory_utilization']} leaves "
            f"{gib(vram - budget):.2f} GiB outside vLLM's budget, less than "
            f"{'the CUDA context and CUDA graphs' if context else 'the CUDA graphs'} need ({gib(context + graphs):.2f} GiB)"
        )
    total = context + max(budget, non_kv + kv_req) + graphs
    if a.is_mla and tp > 1:
        notes.append("MLA latent KV cache is replicated on every tensor-parallel rank")
    elif not a.is_mla and tp > a.kv_heads:
        notes.append(f"tp {tp} > {a.kv_heads} KV heads: vLLM replicates KV heads across ranks")
    if a.model_type in ("gemma2", "gemma3", "gemma3_text"):
        notes.append("sliding-window layers counted as full attention (KV estimate is an upper bound)")
    if a.mtp_layers:
        notes.append("multi-token-prediction layers not counted (vLLM skips them unless speculating)")
    if a.is_moe:
        notes.append("MoE: all experts resident")
    if capacity >= max_len and concurrency > 1 and capacity < requested:
        notes.append(f"only {capacity // max_len} concurrent sequences of {max_len} tokens fit")
    replicas = num_gpus // tp
    if replicas > 1:
        notes.append(f"{replicas} data-parallel replicas of tp={tp}")
    return MemoryEstimate(
        model=ctx.resolved.name,
        model_source=ctx.resolved.source,
        kind="inference",
        gpu=g.name,
        gpu_vram_gib=gib(vram),
        num_gpus=num_gpus,
        tp=tp,
        dtype=dtype,
        params_total=counts["total"],
        params_active=counts["active"],
        params_trainable=0,
        weights_gib=gib(w),
        kv_bytes_per_token=kv_tok_model,
        kv_cache_gib=gib(kv_req),
        kv_capacity_tokens=capacity,
        max_model_len=max_len,
        max_concurrency=round(capacity / max_len, 2) if max_len else 0.0,
        optimizer_gib=0.0,
        gradients_gib=0.0,
        activations_gib=gib(act),
        model_states_gib=gib(w),
        overhead_gib=gib(context + non_torch + graphs),
        torch_peak_gib=gib(non_kv - non_torch + kv_req),
        total_gib=gib(total),
        fits=fits,
        headroom_gib=gib(headroom),
        engine="vllm",
        reserved_gib=gib(non_kv - non_torch + kv_avail) if kv_avail > 0 else gib(non_kv - non_torch),
        notes=tuple(notes),
        breakdown={
            "vllm_budget_gib": gib(budget),
            "kv_available_gib": gib(kv_avail),
            "kv_bytes_per_token_per_gpu": kv_tok,
            "non_torch_gib": gib(non_torch),
            "cuda_graphs_gib": gib(graphs),
            "cuda_context_gib": gib(context),
            "max_num_batched_tokens": mnbt,
            "sampler_gib": gib(vllm_sampler_bytes(a, kw["max_num_seqs"], mnbt)),
        },
        settings=settings_of(kw, tp=tp, num_gpus=num_gpus, max_model_len=max_len),
    )
