"""Inference memory of the two engines that are not vLLM: Hugging Face ``generate`` and SGLang.

vLLM (:func:`runjob_core.estimator.vllm_memory.vllm_inference`) takes a fixed share of the
card up front and fills what is left with KV cache. The two engines here differ:

* **hf** (transformers ``model.generate``) allocates as it goes. Its peak is the weights,
  the KV cache of the sequences actually generated (``concurrency`` sequences of
  ``max_model_len`` = prompt + new tokens; ``DynamicCache`` grows by ``torch.cat``, so one
  layer's cache briefly exists twice), and the transients of one forward pass over the
  prompt: one decoder layer's MLP/attention buffers (the same per-token live set as vLLM's
  profile run) plus the fp32 logits of the last position only (``generate`` asks the model
  for ``logits_to_keep=1`` since transformers 4.45, ``GenerationMixin._prepare_cache_...``
  / ``num_logits_to_keep``). The CUDA context comes on top and is outside PyTorch's
  ``max_memory_allocated``, which is what ``torch_peak_gib`` is comparable with.
* **sglang** sizes its KV pool once at start-up (python/sglang/srt/model_executor/
  model_runner.py ``ModelRunner.profile_max_num_token`` in SGLang 0.4.x, moved to
  model_runner_kv_cache_mixin.py in 0.5):
  ``rest = free_memory_after_weights - total_memory * (1 - mem_fraction_static)`` and
  ``max_total_num_tokens = rest // cell_size`` with ``cell_size`` the KV bytes of one token
  on one GPU (``num_kv_heads(tp) * head_dim * layers * 2 * dtype``; MLA:
  ``(kv_lora_rank + qk_rope_head_dim) * layers * dtype``, the latent on every rank). Activations and CUDA graphs must fit in the ``1 - mem_fraction_static`` left.
"""

from __future__ import annotations

from typing import Any

from runjob_core.errors import RunjobError
from runjob_core.estimator.arch import kv_bytes_per_token
from runjob_core.estimator.constants import CUDA_CONTEXT_GIB, CUDA_GRAPHS_GIB, NON_TORCH_GIB_TP, NON_TORCH_GIB_TP1
from runjob_core.estimator.gpus import GIB, GPUSpec
from runjob_core.estimator.record import (
    Ctx,
    MemoryEstimate,
    gib,
    kv_dtype_bytes,
    nf4_weight_bytes,
    settings_of,
    weight_bytes,
)
from runjob_core.estimator.vllm_memory import vllm_activation_bytes

#: SGLang's default ``mem_fraction_static`` depends on the GPU and TP size (server_args.py
#: ``_handle_gpu_memory_settings``: 0.79-0.88 on 80-96 GB cards); the Qwen3 speed benchmark
#: uses 0.85. Give the real value with ``mem_fraction_static``.
SGLANG_DEFAULT_MEM_FRACTION = 0.85
#: SGLang's default ``chunked_prefill_size`` on large GPUs (server_args.py): the prefill
#: chunk whose activations must fit beside the pool.
SGLANG_CHUNKED_PREFILL = 8192


def hf_inference(ctx: Any, g: GPUSpec, kw: dict[str, Any]) -> dict[str, Any]:
    """Components of a transformers ``generate`` run (per GPU)."""
    a, counts = ctx.arch, ctx.counts
    dtype = kw["dtype"]
    if kw["tp"] not in (None, 1):
        raise RunjobError("engine hf has no tensor parallelism: num_gpus > 1 spreads the layers over the GPUs "
                          "(device_map='auto'); use tp 1, or engine vllm/sglang for tensor parallelism")
    # accelerate's device_map="auto" places whole decoder layers, balanced by size: each GPU
    # holds ~1/n of the layers' weights and KV cache and runs one layer's transients at a time;
    # the embedding sits on the first GPU and the final norm + LM head (with the logits) on the
    # last one, so the busiest GPU carries its share plus the larger of those extras
    n = kw["num_gpus"]
    max_len = kw["max_model_len"] or a.max_position or 4096
    batch = kw["concurrency"]
    kvb = kv_dtype_bytes(kw["kv_cache_dtype"], dtype)
    act_b = 4.0 if dtype == "fp32" else 2.0
    w_all = nf4_weight_bytes(counts) if dtype == "int4" else weight_bytes(counts, dtype)
    ends_b = 4.0 if dtype == "fp32" else 2.0  # embedding / LM head stay 16-bit when quantized
    embed, head = counts["embedding"] * ends_b, counts["lm_head"] * ends_b
    body = max(0.0, w_all - embed - head)
    kv_tok_all = kv_bytes_per_token(a, kvb, 1)
    kv = kv_tok_all * max_len * batch
    prompt_tokens = max_len * batch
    # transformers >= 4.45 computes the prefill logits of the last position only
    # (``logits_to_keep``); older versions project every prompt position and upcast to fp32
    logit_rows = prompt_tokens if kw["hf_prompt_logits"] == "all" else batch
    logits = logit_rows * a.vocab * (act_b + 4)
    layer_act = vllm_activation_bytes(a, prompt_tokens, act_b, 1, 0)
    share_w, share_kv = body / n, kv / n
    kv_cat = kv / max(1, a.layers)  # torch.cat in DynamicCache.update: one layer twice
    first = embed if n > 1 else 0.0
    last = head + logits
    if n == 1:
        w, extras = w_all, logits
    else:
        w, extras = share_w + max(first, head), max(first, last)
    torch_peak = share_w + share_kv + kv_cat + layer_act + (extras if n > 1 else embed + head + logits)
    act = layer_act + logits
    context = CUDA_CONTEXT_GIB * GIB
    total = torch_peak + context
    # every GPU has its own peak: its layers' transients and the cat copy happen on each
    torch_all = w_all + kv + n * (kv_cat + layer_act) + logits
    kv_tok = kv_tok_all / n
    return {
        "weights": w, "kv_tok": kv_tok, "kv": share_kv + kv_cat, "act": act, "torch_peak": torch_peak,
        "overhead": context, "total": total, "fits": total <= g.total_bytes, "headroom": g.total_bytes - total,
        "capacity": int(max(0.0, g.total_bytes - context - w - act) // kv_tok), "max_len": max_len, "tp": 1,
        "num_gpus": n,
        "breakdown": {"cuda_context_gib": CUDA_CONTEXT_GIB, "kv_cache_cat_copy_gib": kv_cat / GIB,
                      "prompt_tokens": prompt_tokens, "prompt_logits_gib": logits / GIB,
                      "torch_peak_all_gpus_gib": torch_all / GIB,
                      "total_all_gpus_gib": (torch_all + n * context) / GIB,
                      "first_gpu_extra_gib": first / GIB, "last_gpu_extra_gib": (last if n > 1 else 0.0) / GIB},
        "notes": ["engine hf: memory grows with the sequences generated; nothing is reserved up front"]
        + ([f"layers spread over {n} GPUs (device_map='auto'); the figures are the busiest GPU's"] if n > 1 else []),
    }


def sglang_inference(ctx: Any, g: GPUSpec, kw: dict[str, Any]) -> dict[str, Any]:
    """Components of an SGLang server: weights, the static KV pool, what is left for activations."""
    a, counts = ctx.arch, ctx.counts
    dtype = kw["dtype"]
    tp = kw["tp"] or kw["num_gpus"]
    mfs = kw["mem_fraction_static"] or SGLANG_DEFAULT_MEM_FRACTION
    if not (0 < mfs < 1):
        raise RunjobError(f"mem_fraction_static must be in (0, 1), got {mfs!r}")
    max_len = kw["max_model_len"] or a.max_position or 4096
    kvb = kv_dtype_bytes(kw["kv_cache_dtype"], dtype)
    act_b = 4.0 if dtype == "fp32" else 2.0
    w = weight_bytes(counts, dtype) / tp
    kv_tok = kv_bytes_per_token(a, kvb, tp)
    context = CUDA_CONTEXT_GIB * GIB
    non_torch = (NON_TORCH_GIB_TP1 if tp == 1 else NON_TORCH_GIB_TP) * GIB
    vram = g.total_bytes
    # free memory after the weights load, minus the reserved (1 - mem_fraction_static) share
    rest = (vram - w - context - non_torch) - vram * (1 - mfs)
    capacity = int(rest // kv_tok) if rest > 0 else 0
    requested = max_len * kw["concurrency"]
    chunk = kw["max_num_batched_tokens"] or SGLANG_CHUNKED_PREFILL
    act = vllm_activation_bytes(a, chunk, act_b, tp, kw["max_num_seqs"])
    graphs = 0.0 if kw["enforce_eager"] else CUDA_GRAPHS_GIB * GIB
    reserve_ok = act + graphs <= vram * (1 - mfs)
    fits = capacity >= requested and reserve_ok
    notes = [f"engine sglang: KV pool = free memory after weights - {1 - mfs:.2f} x total (mem_fraction_static {mfs})"]
    if not reserve_ok:
        notes.append(f"the {1 - mfs:.2f} x total left outside the pool ({(1 - mfs) * vram / GIB:.2f} GiB) is less than "
                     f"a {chunk}-token prefill chunk and CUDA graphs need ({(act + graphs) / GIB:.2f} GiB)")
    pool = max(0.0, rest)
    total = w + context + non_torch + pool + act + graphs
    return {
        "weights": w, "kv_tok": kv_tok, "kv": kv_tok * requested, "act": act, "torch_peak": w + pool + act,
        "overhead": context + non_torch + graphs, "total": total, "fits": fits,
        "headroom": (capacity - requested) * kv_tok if reserve_ok else vram * (1 - mfs) - act - graphs,
        "capacity": capacity, "max_len": max_len, "tp": tp,
        "breakdown": {"mem_fraction_static": mfs, "kv_available_gib": pool / GIB, "kv_bytes_per_token_per_gpu": kv_tok,
                      "cuda_context_gib": context / GIB, "non_torch_gib": non_torch / GIB, "cuda_graphs_gib": graphs / GIB,
                      "chunked_prefill_tokens": chunk},
        "notes": notes,
    }


def other_engine(ctx: Ctx, g: GPUSpec, **kw: Any) -> MemoryEstimate:
    """The :class:`MemoryEstimate` of hf / sglang inference (the formulas above)."""
    fn = hf_inference if kw["engine"] == "hf" else sglang_inference
    r = fn(ctx, g, kw)
    a, counts = ctx.arch, ctx.counts
    tp = r["tp"]
    num_gpus = max(kw["num_gpus"], tp)
    notes = list(r["notes"])
    if a.is_moe:
        notes.append("MoE: all experts resident")
    max_len = r["max_len"]
    return MemoryEstimate(
        model=ctx.resolved.name,
        model_source=ctx.resolved.source,
        kind="inference",
        gpu=g.name,
        gpu_vram_gib=g.total_gib,
        num_gpus=num_gpus,
        tp=tp,
        dtype=kw["dtype"],
        params_total=counts["total"],
        params_active=counts["active"],
        params_trainable=0,
        weights_gib=gib(r["weights"]),
        kv_bytes_per_token=kv_bytes_per_token(a, kv_dtype_bytes(kw["kv_cache_dtype"], kw["dtype"]), 1),
        kv_cache_gib=gib(r["kv"]),
        kv_capacity_tokens=r["capacity"],
        max_model_len=max_len,
        max_concurrency=round(r["capacity"] / max_len, 2) if max_len else 0.0,
        optimizer_gib=0.0,
        gradients_gib=0.0,
        activations_gib=gib(r["act"]),
        model_states_gib=gib(r["weights"]),
        overhead_gib=gib(r["overhead"]),
        torch_peak_gib=gib(r["torch_peak"]),
        total_gib=gib(r["total"]),
        fits=bool(r["fits"]),
        headroom_gib=gib(r["headroom"]),
        engine=kw["engine"],
        reserved_gib=gib(r["torch_peak"]),
        notes=tuple(notes),
        breakdown=dict(r["breakdown"], kv_capacity_tokens=r["capacity"]),
        settings=settings_of(kw, tp=tp, num_gpus=num_gpus, max_model_len=max_len),
    )
