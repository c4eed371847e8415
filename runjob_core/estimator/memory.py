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

Training is in :mod:`runjob_core.estimator.training` (ZeRO model states, Korthikanti
activations, optimizers, offload), suggestions in :mod:`runjob_core.estimator.suggest`.
"""

from __future__ import annotations

from typing import Any

import attrs

from runjob_core.errors import RunjobError
from runjob_core.estimator import vllm_versions
from runjob_core.estimator.arch import Arch, arch_from_config, count_params, kv_bytes_per_token
from runjob_core.estimator.gpus import GIB, GPUSpec, lookup_gpu
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
#: ``adamw_single``: torch.optim.AdamW(foreach=False), what torch < 2.0 ran by default: its
#: ``_single_tensor_adamw`` steps one tensor at a time and holds two temporaries of that
#: tensor at once (``exp_avg_sq.sqrt()`` and its quotient), so its temporaries scale with the
#: largest tensor it is handed (training.single_tensor_step_bytes), not with the model.
OPTIMIZERS = {
    "adamw": (8.0, 4.0, False),
    "adamw_single": (8.0, 0.0, False),
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
#: How the training loss is computed (see :func:`runjob_core.estimator.training.logits_bytes`).
LOSSES = ("standard", "chunked", "fused")
#: Who stores QLoRA's 4-bit base: bitsandbytes (HF/PEFT) or torchao (torchtune).
NF4_BACKENDS = ("bnb", "torchao")


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
    #: The modelling choices that decided the figures (attention kernel, what is sharded or
    #: offloaded, which overhead terms), one line each: shown in ``--json`` and pre-flight.
    assumptions: tuple[str, ...] = ()
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
    optimizer_in_bwd: bool = False,
    loss: str = "standard",
    nf4_backend: str = "bnb",
    hf_prompt_logits: str = "last",
    torch_compile: bool = False,
    vllm_version: str | None = None,
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
    ``optimizer`` (adamw, adamw_fused, adamw_single, adamw8bit, paged_adamw, paged_adamw8bit, adafactor,
    sgd; transformers' spellings such as adamw_8bit are accepted); ``flash_attention`` (False adds the s*s attention
    matrices of eager attention); ``engine`` for inference (vllm, hf, sglang) and SGLang's
    ``mem_fraction_static``; ``cpu_offload`` (ZeRO-Offload / FSDP CPU offload: optimizer
    states and fp32 master weights on the host, with ``zero_stage`` 3 the weights too);
    ``master_weights`` False for pure-bf16 training (no fp32 copy; optimizer states in bf16);
    ``optimizer_in_bwd`` (torchtune): each parameter is stepped in the backward pass as soon as
    its gradient is ready, so no full gradient buffer exists; ``loss``: ``standard`` (one
    fp32 cross entropy over all logits), ``chunked`` (torchtune's CEWithChunkedOutputLoss:
    fp32 copies one chunk at a time) or ``fused`` (a fused linear + cross entropy such as
    torchtune's LinearCrossEntropyLoss or Liger's: no full logits); ``nf4_backend`` for
    QLoRA: ``bnb`` (bitsandbytes, keeps each 4-bit layer's input) or ``torchao`` (torchtune's
    NF4 tensors: frozen layers keep no input); ``hf_prompt_logits`` for engine hf: ``last``
    (transformers >= 4.45 projects only the last prompt position) or ``all`` (older versions:
    fp32 logits for every prompt position); ``torch_compile`` (training): the loss is
    compiled, which removes its fp32 copies (the only compile saving modelled);
    ``vllm_version`` (engine vllm, e.g. ``"0.6.3"``): releases before 0.6.4 count the CUDA
    context inside ``gpu_memory_utilization`` and, before 0.8, profile
    ``max(max_model_len, 2048)`` tokens (:mod:`runjob_core.estimator.vllm_versions`); unset
    means a current release.
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
        optimizer_in_bwd=optimizer_in_bwd,
        loss=loss,
        nf4_backend=nf4_backend,
        hf_prompt_logits=hf_prompt_logits,
        torch_compile=torch_compile,
        vllm_version=vllm_version,
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
    loss = (kw.get("loss") or "standard").strip().lower()
    if loss not in LOSSES:
        raise RunjobError(f"unknown loss {loss!r}; use one of {', '.join(LOSSES)}")
    kw["loss"] = loss
    nf4 = (kw.get("nf4_backend") or "bnb").strip().lower()
    if nf4 not in NF4_BACKENDS:
        raise RunjobError(f"unknown nf4_backend {nf4!r}; use one of {', '.join(NF4_BACKENDS)}")
    kw["nf4_backend"] = nf4
    if kw.get("hf_prompt_logits", "last") not in ("last", "all"):
        raise RunjobError(f"hf_prompt_logits must be 'last' or 'all', got {kw['hf_prompt_logits']!r}")
    if kw["tp"] is not None:
        _check_positive("tp", kw["tp"])
    if kw["zero_stage"] not in (0, 1, 2, 3):
        raise RunjobError(f"zero_stage must be 0, 1, 2 or 3, got {kw['zero_stage']!r}")
    vllm_versions.parse_version(kw.get("vllm_version"))  # a bad version fails here, named, for every engine
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
        from runjob_core.estimator.training import training

        est = training(ctx, kind, g, **kw)
    from runjob_core.estimator.assumptions import assumptions_of

    est = attrs.evolve(est, assumptions=assumptions_of(ctx, kind, est, kw))
    if kind != "inference":
        from runjob_core.estimator.limits import max_seq_len_that_fits

        longest = max_seq_len_that_fits(ctx, kind, g, kw)
        est = attrs.evolve(est, breakdown=dict(est.breakdown, max_seq_len_that_fits=longest))
    if kw.get("suggest") and not est.fits:
        from runjob_core.estimator.suggest import suggestions

        est = attrs.evolve(est, suggestions=tuple(suggestions(ctx, kind, g, est, kw)))
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
            f"{_gib(vram - budget):.2f} GiB outside vLLM's budget, less than "
            f"{'the CUDA context and CUDA graphs' if context else 'the CUDA graphs'} need ({_gib(context + graphs):.2f} GiB)"
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
            "sampler_gib": _gib(vllm_sampler_bytes(a, kw["max_num_seqs"], mnbt)),
        },
        settings=_settings(kw, tp=tp, num_gpus=num_gpus, max_model_len=max_len),
    )


def _other_engine(ctx: _Ctx, g: GPUSpec, **kw: Any) -> MemoryEstimate:
    """hf / sglang inference (formulas in :mod:`runjob_core.estimator.engines`)."""
    from runjob_core.estimator import engines

    fn = engines.hf_inference if kw["engine"] == "hf" else engines.sglang_inference
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
