"""GPU memory estimate for vLLM inference and for full / LoRA / QLoRA fine-tuning.

All sizes are bytes internally and GiB (2**30 bytes) in :class:`MemoryEstimate`.

Inference has three engines (``engine``): ``vllm`` (below), ``hf`` (transformers ``generate``)
and ``sglang`` (its ``mem_fraction_static`` pool), the last two in
:mod:`runjob_core.estimator.engines`.

vLLM follows its own memory profile: vllm/worker/worker.py
``Worker.determine_num_available_blocks`` (V0, v0.6.4-v0.8; rewritten in PR #10511 "overhaul
memory profiling") and vllm/v1/worker/gpu_worker.py ``determine_available_memory`` (V1):
``budget = total_gpu_memory * gpu_memory_utilization``; from it vLLM subtracts the weights,
the peak activation memory of a profile forward pass over ``max_num_batched_tokens`` tokens
and the non-torch memory (NCCL, cuBLAS workspaces); what is left becomes KV cache. The CUDA
context and the CUDA graphs captured afterwards live outside the budget, in the
``1 - gpu_memory_utilization`` slack (vLLM >= 0.21 also profiles CUDA graph memory and takes it
from the budget; the estimate keeps the older accounting). ``enforce_eager`` drops the graphs.

Training: model states (weights, gradients, AdamW states; sharded by ZeRO stage / FSDP over
``num_gpus`` as in Rajbhandari et al. 2019, "ZeRO: Memory Optimizations Toward Training
Trillion Parameter Models", arXiv:1910.02054) + activations
(:func:`runjob_core.estimator.arch.activation_bytes_per_token_layer`, after Korthikanti et al.
2022) + logits + CUDA context and allocator slack.
"""

from __future__ import annotations

from typing import Any

import attrs

from runjob_core.errors import RunjobError
from runjob_core.estimator.arch import (
    default_lora_targets,
    Arch,
    activation_bytes_per_token_layer,
    arch_from_config,
    count_params,
    kv_bytes_per_token,
    lora_modules,
)
from runjob_core.estimator.gpus import GIB, GPUS, GPUSpec, lookup_gpu
from runjob_core.estimator.catalog import MODELS, find_model
from runjob_core.estimator.resolve import ResolvedModel, resolve_model

KINDS = ("inference", "full_ft", "lora", "qlora")
ENGINES = ("vllm", "hf", "sglang")
DTYPES = ("bf16", "fp16", "fp32", "fp8", "int4")
DTYPE_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp32": 4.0, "fp8": 1.0, "int4": 0.5}

# -- constants, each with where it comes from --------------------------------------------
#: CUDA context + cuBLAS/cuDNN handles of one process; 0.3-0.6 GiB on Ampere/Hopper with
#: lazy module loading, up to ~1 GiB with eager loading. Not part of vLLM's budget.
CUDA_CONTEXT_GIB = 0.5
#: vLLM "non_torch_memory": 0.12-0.35 GiB on one GPU in the logs of vllm#10517, #13882 and
#: the V1 profile summaries; 0.25-2 GiB with tensor parallelism (NCCL + custom all-reduce
#: buffers, vllm#13061 and the Bamba PR #10909).
NON_TORCH_GIB_TP1 = 0.3
NON_TORCH_GIB_TP = 0.6
#: CUDA graphs captured after the KV cache is allocated (outside the budget); vLLM logs
#: "Graph capturing finished ... took 0.27-1.5 GiB".
CUDA_GRAPHS_GIB = 0.5
#: vLLM block size: KV capacity is a whole number of 16-token blocks.
VLLM_BLOCK = 16
#: GPTQ/AWQ group size 128 with an fp16 scale and a packed zero point per group.
INT4_GROUP_BYTES_PER_PARAM = 4.0 / 128
#: bitsandbytes NF4 with double quantisation (Dettmers et al. 2023, QLoRA, arXiv:2305.14314):
#: an 8-bit absmax per 64 weights plus an fp32 constant per 256 of those.
NF4_DQ_BYTES_PER_PARAM = 1.0 / 64 + 4.0 / (64 * 256)
#: PyTorch caching-allocator slack on top of the torch peak during training (blocks rounded
#: to 512 B, 2 MiB segments that cannot be split across streams): what separates
#: ``max_memory_reserved`` from ``max_memory_allocated``. A heuristic, not fitted to a
#: source: the published training cases compare ``torch_peak_gib`` (allocated), so this
#: only moves ``reserved_gib``, ``total_gib`` and the verdict.
ALLOCATOR_SLACK = 0.05
#: Optimizers: (state bytes per trainable parameter with fp32 states, step-temporary bytes per
#: parameter, states paged). ``adamw`` is torch.optim.AdamW (two moments, Loshchilov & Hutter
#: 2019) with its default foreach implementation, whose step allocates one temporary list as
#: large as the parameters (``_foreach_sqrt`` of the second moments); the fused and
#: bitsandbytes optimizers update in place. ``adamw8bit``: bitsandbytes 8-bit blockwise states
#: (Dettmers et al. 2022, arXiv:2110.02861), 2 bytes per parameter. ``paged_*``: the same
#: states in CUDA unified memory (``cudaMallocManaged``, bitsandbytes ``GlobalPageManager``),
#: outside PyTorch's caching allocator and evictable to host RAM, so they are reported as
#: ``paged_gib`` and not counted against the card. ``adafactor`` (Shazeer & Stern 2018,
#: arXiv:1804.04235) keeps factored row/column second-moment statistics, O(m+n) per m x n
#: matrix and no first moment with the transformers defaults (beta1=None): ~0.03 byte per
#: parameter for 4k-wide layers. ``sgd``: torch.optim.SGD without momentum keeps nothing.
OPTIMIZERS = {
    "adamw": (8.0, 4.0, False),
    "adamw_fused": (8.0, 0.0, False),
    "adamw8bit": (2.0, 0.0, False),
    "paged_adamw": (8.0, 0.0, True),
    "paged_adamw8bit": (2.0, 0.0, True),
    "adafactor": (0.03, 0.0, False),
    "sgd": (0.0, 0.0, False),
}
#: Older spellings (transformers' ``optim`` names) kept working.
OPTIMIZER_ALIASES = {"adamw_8bit": "adamw8bit", "paged_adamw_8bit": "paged_adamw8bit", "adamw_torch": "adamw",
                     "adamw_torch_fused": "adamw_fused", "adamw_bnb_8bit": "adamw8bit", "paged_adamw_32bit": "paged_adamw"}
LORA_DTYPES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0}


def kv_dtype_bytes(kv_cache_dtype: str | None, dtype: str) -> float:
    """Bytes of one KV element: ``auto`` follows the model dtype (fp32 models keep fp32 KV)."""
    kv_dtype = (kv_cache_dtype or "auto").lower()
    if kv_dtype == "auto":
        return 4.0 if dtype == "fp32" else 2.0
    if kv_dtype.startswith("fp8"):
        return 1.0
    if kv_dtype in ("bf16", "fp16", "bfloat16", "float16"):
        return 2.0
    if kv_dtype in ("fp32", "float32"):
        return 4.0
    raise RunjobError(f"unknown kv_cache_dtype {kv_dtype!r}; use auto, fp8, bf16, fp16 or fp32")


def default_batched_tokens(gpu: GPUSpec) -> int:
    """vLLM V1 default ``max_num_batched_tokens`` of the offline ``LLM`` class (chunked
    prefill on): 16384 on GPUs with >= 70 GiB, 8192 below (vllm/engine/arg_utils.py
    ``EngineArgs._set_default_args_v1``; ``vllm serve`` uses 8192/2048). vLLM V0 without
    chunked prefill profiles ``max(max_model_len, 2048)`` tokens: pass that explicitly."""
    return 16384 if gpu.total_gib >= 70 else 8192


@attrs.frozen
class MemoryEstimate:
    """Peak GPU memory of one job, per GPU unless a field says otherwise."""

    model: str
    model_source: str
    kind: str
    gpu: str
    gpu_vram_gib: float
    num_gpus: int
    tp: int
    dtype: str
    params_total: int
    params_active: int
    params_trainable: int
    weights_gib: float
    kv_bytes_per_token: float
    kv_cache_gib: float
    kv_capacity_tokens: int
    max_model_len: int | None
    max_concurrency: float
    optimizer_gib: float
    gradients_gib: float
    activations_gib: float
    model_states_gib: float
    overhead_gib: float
    torch_peak_gib: float
    total_gib: float
    fits: bool
    headroom_gib: float
    #: Components the engine/optimizer options introduced (kept after the original fields).
    engine: str = "vllm"
    #: What ``torch.cuda.max_memory_reserved`` would show: the torch peak plus the caching
    #: allocator's slack (training) or the torch peak itself (inference).
    reserved_gib: float = 0.0
    #: Host (CPU) memory of states offloaded with ``cpu_offload`` (ZeRO-Offload / FSDP).
    offloaded_gib: float = 0.0
    #: Paged optimizer states in CUDA unified memory (not counted against the card).
    paged_gib: float = 0.0
    suggestions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    breakdown: dict[str, float] = attrs.field(factory=dict, eq=False)
    settings: dict[str, Any] = attrs.field(factory=dict, eq=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in attrs.fields(MemoryEstimate):
            v = getattr(self, f.name)
            if isinstance(v, float):
                v = round(v, 4)
            elif isinstance(v, tuple):
                v = list(v)
            elif isinstance(v, dict):
                v = {k: (round(x, 4) if isinstance(x, float) else x) for k, x in v.items()}
            out[f.name] = v
        return out


# ---------------------------------------------------------------------------------------


def weight_bytes(counts: dict[str, int], dtype: str) -> float:
    """Bytes of the weights of the whole model in ``dtype``.

    fp8 and int4 quantise the decoder's linear layers only (what vLLM's fp8 and GPTQ/AWQ
    checkpoints do); embeddings, LM head and norms stay 16-bit.
    """
    total, linear = counts["total"], counts["linear"]
    if dtype in ("bf16", "fp16", "fp32"):
        return total * DTYPE_BYTES[dtype]
    if dtype == "fp8":
        return linear * 1.0 + (total - linear) * 2.0
    if dtype == "int4":
        return linear * (0.5 + INT4_GROUP_BYTES_PER_PARAM) + (total - linear) * 2.0
    raise RunjobError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")


def nf4_weight_bytes(counts: dict[str, int]) -> float:
    """QLoRA base model: NF4 linear layers (~0.5 byte/param + constants), 16-bit rest."""
    total, linear = counts["total"], counts["linear"]
    return linear * (0.5 + NF4_DQ_BYTES_PER_PARAM) + (total - linear) * 2.0


def vllm_activation_bytes(a: Arch, tokens: int, act_b: float, tp: int, max_num_seqs: int) -> float:
    """Peak of vLLM's profile forward over ``tokens`` tokens (per GPU).

    The largest live set in one decoder layer: the gate/up output (2*I/tp) and the
    act-and-mul output (I/tp) plus ~3 hidden-size buffers (residual, normed input, output),
    i.e. ``tokens * act_bytes * (3*I/tp + 3*h)``; for fused MoE the three caches of
    ``fused_moe`` (tokens*top_k*(2*I_moe, I_moe)/tp and tokens*top_k*h). Fitted to the two
    profile runs of Llama-3.1-8B in vllm#10517 (20000 and 29000 tokens: 2.07 and 2.99 GiB,
    i.e. 110 KB per token; the formula gives 110.6 KB). Plus the sampler's fp32 logits for
    ``min(max_num_seqs, tokens)`` sequences.
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
    sampler = min(max_num_seqs, tokens) * a.vocab * 4
    return layer + sampler


def _gib(x: float) -> float:
    return x / GIB


@attrs.frozen
class _Ctx:
    resolved: ResolvedModel
    arch: Arch
    counts: dict[str, int] = attrs.field(eq=False)


def _context(model: str | ResolvedModel) -> _Ctx:
    r = model if isinstance(model, ResolvedModel) else resolve_model(model)
    a = arch_from_config(r.config, source=r.source)
    return _Ctx(r, a, count_params(a))


def estimate(
    model: str,
    kind: str,
    gpu: str,
    *,
    num_gpus: int = 1,
    tp: int | None = None,
    dtype: str = "bf16",
    max_model_len: int | None = None,
    concurrency: int = 1,
    seq_len: int = 2048,
    batch: int = 1,
    zero_stage: int = 0,
    grad_checkpointing: bool = False,
    gpu_memory_utilization: float = 0.9,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int = 256,
    kv_cache_dtype: str = "auto",
    enforce_eager: bool = False,
    lora_rank: int = 16,
    lora_targets: tuple[str, ...] | list[str] | None = None,
    lora_dropout: float = 0.05,
    lora_dtype: str = "fp32",
    optimizer: str = "adamw",
    flash_attention: bool = True,
    engine: str = "vllm",
    mem_fraction_static: float | None = None,
    cpu_offload: bool = False,
    master_weights: bool = True,
    suggest: bool = True,
) -> MemoryEstimate:
    """Estimate the per-GPU peak memory of running ``model`` as ``kind`` on ``gpu``.

    ``model``: local folder/file with a Hugging Face ``config.json``, a repo id found in the
    local Hugging Face cache, or a name of the built-in table. ``kind``: ``inference`` (vLLM),
    ``full_ft``, ``lora`` or ``qlora``. ``num_gpus``: GPUs of the job (inference: ``tp``
    defaults to it, extra GPUs are data-parallel replicas; training: data-parallel ranks that
    ZeRO/FSDP shard over). ``batch`` is the per-GPU micro-batch. ``zero_stage`` 0-3 (FSDP
    FULL_SHARD = 3, SHARD_GRAD_OP = 2). Unknown model or GPU names raise
    :class:`~runjob_core.errors.RunjobError`.

    Extra knobs: vLLM's ``max_num_batched_tokens`` (profile size; default 16384 on GPUs with
    >= 70 GiB, else 8192), ``max_num_seqs``, ``kv_cache_dtype`` (auto|fp8|bf16|fp16|fp32),
    ``enforce_eager`` (no CUDA graphs); LoRA ``lora_rank``, ``lora_targets`` (default every
    linear projection, in the architecture's own module names), ``lora_dropout``,
    ``lora_dtype`` (fp32 as PEFT autocasts adapters, or bf16 as the QLoRA repository);
    ``optimizer`` (adamw, adamw_fused, adamw8bit, paged_adamw, paged_adamw8bit, adafactor,
    sgd; transformers' spellings such as adamw_8bit are accepted); ``flash_attention`` (False adds the s*s attention
    matrices of eager attention); ``engine`` for inference (vllm, hf, sglang) and SGLang's
    ``mem_fraction_static``; ``cpu_offload`` (ZeRO-Offload / FSDP CPU offload: optimizer
    states and fp32 master weights on the host, with ``zero_stage`` 3 the weights too);
    ``master_weights`` False for pure-bf16 training (no fp32 copy; optimizer states in bf16).
    """
    ctx = _context(model)
    g = lookup_gpu(gpu)
    return _estimate(
        ctx,
        kind,
        g,
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
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        kv_cache_dtype=kv_cache_dtype,
        enforce_eager=enforce_eager,
        lora_rank=lora_rank,
        lora_targets=tuple(lora_targets) if lora_targets is not None else None,
        lora_dropout=lora_dropout,
        lora_dtype=lora_dtype,
        optimizer=optimizer,
        flash_attention=flash_attention,
        engine=engine,
        mem_fraction_static=mem_fraction_static,
        cpu_offload=cpu_offload,
        master_weights=master_weights,
        suggest=suggest,
    )


def _check_positive(name: str, value: Any, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise RunjobError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _estimate(ctx: _Ctx, kind: str, g: GPUSpec, **kw: Any) -> MemoryEstimate:
    kind = (kind or "").strip().lower().replace("-", "_")
    if kind in ("sft", "full", "fullft", "full_finetune"):
        kind = "full_ft"
    if kind not in KINDS:
        raise RunjobError(f"unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    dtype = (kw["dtype"] or "bf16").strip().lower()
    if dtype == "bfloat16":
        dtype = "bf16"
    if dtype not in DTYPES:
        raise RunjobError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    kw["dtype"] = dtype
    _check_positive("num_gpus", kw["num_gpus"])
    _check_positive("concurrency", kw["concurrency"])
    _check_positive("seq_len", kw["seq_len"])
    _check_positive("batch", kw["batch"])
    if kw["tp"] is not None:
        _check_positive("tp", kw["tp"])
    if kw["zero_stage"] not in (0, 1, 2, 3):
        raise RunjobError(f"zero_stage must be 0, 1, 2 or 3, got {kw['zero_stage']!r}")
    gmu = kw["gpu_memory_utilization"]
    if not (0 < gmu <= 1):
        raise RunjobError(f"gpu_memory_utilization must be in (0, 1], got {gmu!r}")
    engine = (kw["engine"] or "vllm").strip().lower()
    if engine not in ENGINES:
        raise RunjobError(f"unknown engine {engine!r}; use one of {', '.join(ENGINES)}")
    kw["engine"] = engine
    if kind == "inference" and engine != "vllm":
        est = _other_engine(ctx, g, **kw)
    elif kind == "inference":
        est = _inference(ctx, g, **kw)
    else:
        est = _training(ctx, kind, g, **kw)
    if kw.get("suggest") and not est.fits:
        est = attrs.evolve(est, suggestions=tuple(_suggestions(ctx, kind, g, est, kw)))
    return est


# ---------------------------------------------------------------------------------------
# inference
# ---------------------------------------------------------------------------------------


def _inference(ctx: _Ctx, g: GPUSpec, **kw: Any) -> MemoryEstimate:
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
    mnbt = kw["max_num_batched_tokens"] or default_batched_tokens(g)
    act = vllm_activation_bytes(a, mnbt, act_b, tp, kw["max_num_seqs"])
    non_torch = (NON_TORCH_GIB_TP1 if tp == 1 else NON_TORCH_GIB_TP) * GIB
    graphs = 0.0 if kw["enforce_eager"] else CUDA_GRAPHS_GIB * GIB
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
            f"{_gib(vram - budget):.2f} GiB outside vLLM's budget, less than the CUDA context "
            f"and CUDA graphs need ({_gib(context + graphs):.2f} GiB)"
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
        gpu_vram_gib=_gib(vram),
        num_gpus=num_gpus,
        tp=tp,
        dtype=dtype,
        params_total=counts["total"],
        params_active=counts["active"],
        params_trainable=0,
        weights_gib=_gib(w),
        kv_bytes_per_token=kv_tok_model,
        kv_cache_gib=_gib(kv_req),
        kv_capacity_tokens=capacity,
        max_model_len=max_len,
        max_concurrency=round(capacity / max_len, 2) if max_len else 0.0,
        optimizer_gib=0.0,
        gradients_gib=0.0,
        activations_gib=_gib(act),
        model_states_gib=_gib(w),
        overhead_gib=_gib(context + non_torch + graphs),
        torch_peak_gib=_gib(non_kv - non_torch + kv_req),
        total_gib=_gib(total),
        fits=fits,
        headroom_gib=_gib(headroom),
        engine="vllm",
        reserved_gib=_gib(non_kv - non_torch + kv_avail) if kv_avail > 0 else _gib(non_kv - non_torch),
        notes=tuple(notes),
        breakdown={
            "vllm_budget_gib": _gib(budget),
            "kv_available_gib": _gib(kv_avail),
            "kv_bytes_per_token_per_gpu": kv_tok,
            "non_torch_gib": _gib(non_torch),
            "cuda_graphs_gib": _gib(graphs),
            "cuda_context_gib": _gib(context),
            "max_num_batched_tokens": mnbt,
        },
        settings=_settings(kw, tp=tp, num_gpus=num_gpus, max_model_len=max_len),
    )


def _other_engine(ctx: _Ctx, g: GPUSpec, **kw: Any) -> MemoryEstimate:
    """hf / sglang inference (formulas in :mod:`runjob_core.estimator.engines`)."""
    import sys

    from runjob_core.estimator import engines

    helpers = sys.modules[__name__]
    fn = engines.hf_inference if kw["engine"] == "hf" else engines.sglang_inference
    r = fn(ctx, g, kw, helpers)
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
        weights_gib=_gib(r["weights"]),
        kv_bytes_per_token=kv_bytes_per_token(a, kv_dtype_bytes(kw["kv_cache_dtype"], kw["dtype"]), 1),
        kv_cache_gib=_gib(r["kv"]),
        kv_capacity_tokens=r["capacity"],
        max_model_len=max_len,
        max_concurrency=round(r["capacity"] / max_len, 2) if max_len else 0.0,
        optimizer_gib=0.0,
        gradients_gib=0.0,
        activations_gib=_gib(r["act"]),
        model_states_gib=_gib(r["weights"]),
        overhead_gib=_gib(r["overhead"]),
        torch_peak_gib=_gib(r["torch_peak"]),
        total_gib=_gib(r["total"]),
        fits=bool(r["fits"]),
        headroom_gib=_gib(r["headroom"]),
        engine=kw["engine"],
        reserved_gib=_gib(r["torch_peak"]),
        notes=tuple(notes),
        breakdown=dict(r["breakdown"], kv_capacity_tokens=r["capacity"]),
        settings=_settings(kw, tp=tp, num_gpus=num_gpus, max_model_len=max_len),
    )


def _settings(kw: dict[str, Any], **over: Any) -> dict[str, Any]:
    s = {k: v for k, v in kw.items() if k != "suggest"}
    if isinstance(s.get("lora_targets"), tuple):
        s["lora_targets"] = list(s["lora_targets"])
    s.update(over)
    return s


# ---------------------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------------------


def _layer_params(a: Arch, counts: dict[str, int]) -> float:
    body = counts["total"] - counts["embedding"] - counts["lm_head"]
    return body / max(1, a.layers)


def _training(ctx: _Ctx, kind: str, g: GPUSpec, **kw: Any) -> MemoryEstimate:
    a, counts = ctx.arch, ctx.counts
    dtype = kw["dtype"]
    notes: list[str] = []
    if kind in ("full_ft", "lora") and dtype in ("fp8", "int4"):
        hint = " (use kind qlora for a 4-bit base)" if dtype == "int4" else ""
        raise RunjobError(f"{kind} supports dtype bf16, fp16 or fp32, not {dtype}{hint}")
    if kw["tp"] not in (None, 1):
        notes.append("tensor parallelism is not modelled for training; sharding is by zero_stage")
    optim = (kw["optimizer"] or "adamw").lower().replace("-", "_")
    optim = OPTIMIZER_ALIASES.get(optim, optim)
    if optim not in OPTIMIZERS:
        raise RunjobError(f"unknown optimizer {optim!r}; use one of {', '.join(OPTIMIZERS)}")
    kw["optimizer"] = optim
    state_b, temp_b, paged = OPTIMIZERS[optim]
    pure = not kw["master_weights"] and dtype in ("bf16", "fp16")
    if pure and state_b >= 4:
        # pure bf16: torch optimizers create their states like the parameter (bf16), so the
        # fp32 figures halve; 8-bit states and Adafactor's factors are unchanged
        state_b, temp_b = state_b / 2, temp_b / 2
    offload = bool(kw["cpu_offload"])
    if paged:
        notes.append("paged optimizer: its states live in CUDA unified memory outside PyTorch's allocator "
                     "(paged_gib) and are evicted to host RAM under memory pressure")
    n = kw["num_gpus"]
    stage = kw["zero_stage"]
    tokens = kw["seq_len"] * kw["batch"]
    act_b = 4 if dtype == "fp32" else 2
    psi = counts["total"]
    trainable = 0
    lora_params = 0
    if kind == "full_ft":
        # Rajbhandari et al. 2019 (ZeRO), section 3.1: mixed-precision Adam keeps 2 + 2 + K
        # bytes per parameter with K = 12 (fp32 master copy, momentum, variance)
        if dtype == "fp32":
            w_b, g_b, o_b = 4.0, 4.0, state_b
        elif pure:  # no fp32 master copy (torchtune dtype=bf16, Lightning "bf16-true")
            w_b, g_b, o_b = 2.0, 2.0, state_b
        else:  # mixed precision: 16-bit weights and grads, fp32 master copy + optimizer states
            w_b, g_b, o_b = 2.0, 2.0, 4.0 + state_b
        trainable = psi
        weights = psi * w_b / (n if stage >= 3 else 1)
        grads = psi * g_b / (n if stage >= 2 else 1)
        opt = psi * o_b / (n if stage >= 1 else 1)
        mode = "full"
        step_temp = psi * temp_b / (n if stage >= 1 else 1)
    else:
        targets = kw["lora_targets"] or default_lora_targets(a)
        kw["lora_targets"] = tuple(targets)
        mods = lora_modules(a, tuple(targets))
        r = kw["lora_rank"]
        if not isinstance(r, int) or r < 1:
            raise RunjobError(f"lora_rank must be an integer >= 1, got {r!r}")
        lora_params = sum(r * (fi + fo) * copies for _n, fi, fo, copies in mods)
        trainable = lora_params
        if kind == "lora":
            base = psi * DTYPE_BYTES[dtype]
        else:
            base = nf4_weight_bytes(counts)
            if dtype not in ("bf16", "fp16"):
                notes.append("qlora: base weights are NF4, compute dtype bf16")
            act_b = 2
        ldt = (kw["lora_dtype"] or "fp32").lower()
        if ldt not in LORA_DTYPES:
            raise RunjobError(f"unknown lora_dtype {ldt!r}; use fp32, bf16 or fp16")
        lb = LORA_DTYPES[ldt]
        shard_base = n if stage >= 3 else 1
        weights = base / shard_base + lora_params * lb / (n if stage >= 3 else 1)
        grads = lora_params * lb / (n if stage >= 2 else 1)
        opt = lora_params * state_b / (n if stage >= 1 else 1)
        mode = kind
        step_temp = lora_params * temp_b / (n if stage >= 1 else 1)
    per_layer = activation_bytes_per_token_layer(
        a,
        mode=mode,
        act_bytes=act_b,
        lora_targets=tuple(kw["lora_targets"] or ()) if kind != "full_ft" else (),
        lora_dropout=kw["lora_dropout"],
        flash_attention=kw["flash_attention"],
        seq_len=kw["seq_len"],
    )
    # Korthikanti et al. 2022 (arXiv:2205.05198), section 4: without recomputation every layer
    # keeps its per-layer activations (``per_layer``, their s*b*h*(34 + 5*a*s/h) minus the
    # attention matrix flash/SDPA attention never stores); with full activation
    # checkpointing each layer keeps only its 16-bit input (2*s*b*h bytes) and one layer's
    # activations are rebuilt at a time during backward.
    if kw["grad_checkpointing"]:
        layers_act = tokens * (a.layers * act_b * a.hidden + per_layer)
    else:
        layers_act = tokens * a.layers * per_layer
    # the loss: transformers' ForCausalLMLoss upcasts the 16-bit logits to fp32
    # (``logits.float()``), cross_entropy keeps the fp32 log-softmax for backward and the
    # backward writes an fp32 gradient of the same size: vocab x tokens x (2 + 4 + 4 + 2)
    logits = tokens * a.vocab * (act_b + 10)
    final = tokens * a.hidden * (4 + act_b)  # final RMSNorm: fp32 input + LM-head input
    activations = layers_act + logits + final
    gather = 0.0
    if stage >= 3 and (n > 1 or offload):
        # ZeRO-3/FSDP all-gathers a layer's weights (and prefetches the next one)
        per_layer_w = _layer_params(a, counts) * (0.55 if kind == "qlora" else DTYPE_BYTES.get(dtype, 2))
        gather = 2 * per_layer_w
    paged_bytes = 0.0
    if paged:
        paged_bytes, opt = opt, 0.0
    offloaded = 0.0
    if offload:
        # ZeRO-Offload (Ren et al. 2021, arXiv:2101.06840): optimizer states, fp32 master
        # weights and the reduced 16-bit gradients live on the host, the Adam step runs on
        # the CPU; the GPU keeps a gradient bucket of about one layer. With ZeRO-3 /
        # FSDP(cpu_offload=CPUOffload(offload_params=True)) the weights go too and the GPU
        # holds only the all-gathered layers (``gather`` below).
        layer_grad = _layer_params(a, counts) * (2 if kind == "full_ft" else 0) + (grads / max(1, a.layers))
        offloaded = opt + grads + paged_bytes
        opt, paged_bytes, step_temp = 0.0, 0.0, 0.0
        grads = min(grads, layer_grad)
        if stage >= 3:
            offloaded += weights
            weights = 0.0
    states = weights + grads + opt
    torch_peak = states + max(activations, step_temp) + gather
    overhead = CUDA_CONTEXT_GIB * GIB + ALLOCATOR_SLACK * torch_peak
    total = torch_peak + overhead
    vram = g.total_bytes
    fits = total <= vram
    if a.is_moe:
        experts = "experts" in (kw["lora_targets"] or ())
        notes.append("MoE: all experts resident and trained" if kind == "full_ft" else
                     "MoE: all experts resident; LoRA adapters on every routed expert" if experts else
                     "MoE: all experts resident; LoRA adapters on attention, dense and shared MLPs (add target 'experts' for the routed experts)")
    if stage == 0 and n > 1:
        notes.append("zero_stage 0: every data-parallel rank holds full model states")
    return MemoryEstimate(
        model=ctx.resolved.name,
        model_source=ctx.resolved.source,
        kind=kind,
        gpu=g.name,
        gpu_vram_gib=_gib(vram),
        num_gpus=n,
        tp=1,
        dtype=dtype,
        params_total=psi,
        params_active=counts["active"],
        params_trainable=trainable,
        weights_gib=_gib(weights),
        kv_bytes_per_token=kv_bytes_per_token(a, 2.0, 1),
        kv_cache_gib=0.0,
        kv_capacity_tokens=0,
        max_model_len=None,
        max_concurrency=0.0,
        optimizer_gib=_gib(opt),
        gradients_gib=_gib(grads),
        activations_gib=_gib(activations),
        model_states_gib=_gib(states),
        overhead_gib=_gib(overhead),
        torch_peak_gib=_gib(torch_peak),
        total_gib=_gib(total),
        fits=fits,
        headroom_gib=_gib(vram - total),
        engine="torch",
        reserved_gib=_gib(torch_peak * (1 + ALLOCATOR_SLACK)),
        offloaded_gib=_gib(offloaded),
        paged_gib=_gib(paged_bytes),
        notes=tuple(notes),
        breakdown={
            "activations_layers_gib": _gib(layers_act),
            "activations_logits_gib": _gib(logits),
            "activation_bytes_per_token_layer": per_layer,
            "optimizer_step_temporaries_gib": _gib(step_temp),
            "zero3_gather_gib": _gib(gather),
            "cuda_context_gib": CUDA_CONTEXT_GIB,
            "lora_params": lora_params,
            "tokens_per_gpu": tokens,
        },
        settings=_settings(kw, num_gpus=n),
    )


# ---------------------------------------------------------------------------------------
# suggestions
# ---------------------------------------------------------------------------------------


def _try(ctx: _Ctx, kind: str, g: GPUSpec, kw: dict[str, Any], **over: Any) -> MemoryEstimate | None:
    k = dict(kw)
    k.update(over)
    k["suggest"] = False
    try:
        return _estimate(ctx, kind, g, **k)
    except RunjobError:
        return None


def _same_family_smaller(ctx: _Ctx) -> list[Any]:
    spec = ctx.resolved.spec or find_model(ctx.resolved.name)
    if spec is None:
        return []
    smaller = [m for m in MODELS if m.family == spec.family and m.published_params < ctx.counts["total"]]
    return sorted(smaller, key=lambda m: -m.published_params)


def _suggestions(ctx: _Ctx, kind: str, g: GPUSpec, est: MemoryEstimate, kw: dict[str, Any]) -> list[str]:
    out: list[str] = []
    a = ctx.arch
    bigger = sorted((x for x in GPUS if x.total_bytes > g.total_bytes), key=lambda x: x.total_bytes)
    if kind == "inference" and kw["engine"] == "hf":
        for n in (2, 4, 8):
            if n <= est.num_gpus:
                continue
            e = _try(ctx, kind, g, kw, num_gpus=n)
            if e and e.fits:
                out.append(f"spread the layers over {n} x {g.name} (device_map='auto'), "
                           f"{e.total_gib:.1f} GiB per GPU; or serve it with engine vllm/sglang and tp={n}")
                break
        else:
            out.append(f"does not fit on up to 8 x {g.name} with device_map='auto'; use a larger GPU or a quantized checkpoint")
        for x in bigger:
            e = _try(ctx, kind, x, kw)
            if e and e.fits:
                out.append(f"or {est.num_gpus} x {x.name} ({x.total_gib:.1f} GiB)")
                break
        if kw["dtype"] in ("bf16", "fp16", "fp32"):
            for q in ("fp8", "int4"):
                e = _try(ctx, kind, g, kw, dtype=q)
                if e and e.fits:
                    out.append(f"or load a {q} quantized checkpoint on the same {est.num_gpus} GPU(s)")
                    break
    elif kind == "inference":
        tp0 = est.tp
        for t in (2, 4, 8, 16):
            if t <= tp0 or a.heads % t:
                continue
            e = _try(ctx, kind, g, kw, tp=t, num_gpus=t)
            if e and e.fits:
                node = " (more than one 8-GPU node: add pipeline parallelism)" if t > 8 else ""
                out.append(
                    f"use tp={t} ({t} x {g.name}): {e.kv_capacity_tokens:,} KV tokens per replica, "
                    f"{e.max_concurrency:g} sequences of {e.max_model_len} tokens{node}"
                )
                break
        else:
            out.append(f"does not fit on up to 16 x {g.name} with tp; use a larger GPU or a quantized checkpoint")
        for x in bigger:
            e = _try(ctx, kind, x, kw, tp=tp0, num_gpus=est.num_gpus)
            if e and e.fits:
                out.append(f"or {est.num_gpus} x {x.name} ({x.total_gib:.1f} GiB) with tp={tp0}")
                break
        else:
            if bigger:
                out.append(f"no GPU type in the table fits it with {est.num_gpus} GPU(s) and tp={tp0}")
        if est.kv_capacity_tokens > 0:
            per_seq = est.kv_capacity_tokens // max(1, kw["concurrency"])
            fit_len = per_seq // 256 * 256 if per_seq >= 256 else per_seq
            if fit_len > 0:
                out.append(f"or lower max_model_len to {fit_len} (fits {est.kv_capacity_tokens:,} KV tokens)")
        elif est.weights_gib > 0 and "vllm_budget_gib" in est.breakdown:
            out.append(
                f"the weights alone ({est.weights_gib:.1f} GiB per GPU) leave no room for KV cache "
                f"in the {est.breakdown['vllm_budget_gib']:.1f} GiB vLLM budget"
            )
        elif est.weights_gib > 0:
            out.append(f"the weights alone ({est.weights_gib:.1f} GiB per GPU) leave no room for KV cache")
        if kw["engine"] == "vllm" and kw["gpu_memory_utilization"] < 0.95:
            e = _try(ctx, kind, g, kw, gpu_memory_utilization=0.95)
            if e and e.fits:
                out.append("or raise gpu_memory_utilization to 0.95")
        if kw["dtype"] in ("bf16", "fp16", "fp32"):
            for q in ("fp8", "int4"):
                e = _try(ctx, kind, g, kw, dtype=q)
                if e and e.fits:
                    out.append(f"or serve a {q} quantized checkpoint on the same {est.num_gpus} GPU(s)")
                    break
    else:
        n0 = est.num_gpus
        ckpt = kw["grad_checkpointing"]
        if not ckpt:
            e = _try(ctx, kind, g, kw, grad_checkpointing=True)
            if e and e.fits:
                out.append(f"enable gradient checkpointing ({e.total_gib:.1f} GiB per GPU)")
        found = False
        for extra_ckpt in ((False, True) if not ckpt else (False,)):
            for n in (2, 4, 8, 16, 32, 64):
                if n < n0 or (n == n0 and kw["zero_stage"] == 3):
                    continue
                e = _try(ctx, kind, g, kw, num_gpus=n, zero_stage=3, grad_checkpointing=ckpt or extra_ckpt)
                if e and e.fits:
                    how = " with gradient checkpointing" if extra_ckpt else ""
                    out.append(
                        f"or shard with ZeRO-3/FSDP over {n} x {g.name}{how} ({e.total_gib:.1f} GiB per GPU)"
                    )
                    found = True
                    break
            if found:
                break
        if kw["batch"] > 1:
            e = _try(ctx, kind, g, kw, batch=1)
            if e and e.fits:
                out.append("or use micro-batch 1 with gradient accumulation")
        alt = {"full_ft": ("lora", "qlora"), "lora": ("qlora",), "qlora": ()}[kind]
        for k2 in alt:
            e = _try(ctx, k2, g, kw)
            if e and e.fits:
                out.append(f"or train with {k2} ({e.total_gib:.1f} GiB per GPU)")
                break
        for x in bigger:
            e = _try(ctx, kind, x, kw)
            if e and e.fits:
                out.append(f"or {est.num_gpus} x {x.name} ({x.total_gib:.1f} GiB)")
                break
        else:
            if bigger:
                out.append(f"no GPU type in the table fits it with {est.num_gpus} GPU(s) at these settings")
    for m in _same_family_smaller(ctx):
        e = _try(_context(ResolvedModel(m.name, dict(m.config), "table", m.source, m)), kind, g, kw)
        if e and e.fits:
            out.append(f"or a smaller model of the same family: {m.name}")
            break
    if out and out[0].startswith("or "):
        out[0] = out[0][3:]
    return out
