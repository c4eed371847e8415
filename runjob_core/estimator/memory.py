"""GPU memory estimate of one job: vLLM, SGLang or transformers inference, full / LoRA / QLoRA
fine-tuning.

:func:`estimate` checks the settings and dispatches: vLLM to
:mod:`~runjob_core.estimator.vllm_memory` (its own memory profile), hf and SGLang to
:mod:`~runjob_core.estimator.engines`, training to :mod:`~runjob_core.estimator.training`
(ZeRO/FSDP model states, Korthikanti activations, optimizers, offload). Every estimate then
lists the assumptions that decided it (:mod:`~runjob_core.estimator.assumptions`), a
training estimate its longest sequence that fits (:mod:`~runjob_core.estimator.limits`), and
one that does not fit what would (:mod:`~runjob_core.estimator.suggest`). The record is
:class:`~runjob_core.estimator.record.MemoryEstimate` (bytes inside, GiB in the record); the
constants, each with its source, are in :mod:`~runjob_core.estimator.constants`.
"""

from __future__ import annotations

from typing import Any

import attrs

from runjob_core.errors import RunjobError
from runjob_core.estimator import vllm_versions
from runjob_core.estimator.assumptions import assumptions_of
from runjob_core.estimator.constants import DTYPES, ENGINES, FSDP_ROOTS, KINDS, LOSSES, NF4_BACKENDS
from runjob_core.estimator.engines import other_engine
from runjob_core.estimator.gpus import GPUSpec, lookup_gpu
from runjob_core.estimator.limits import max_seq_len_that_fits
from runjob_core.estimator.record import Ctx, MemoryEstimate, context
from runjob_core.estimator.suggest import suggestions
from runjob_core.estimator.training import training
from runjob_core.estimator.vllm_memory import vllm_inference

__all__ = ["DTYPES", "KINDS", "MemoryEstimate", "estimate"]


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
    fsdp_root: str = "sharded",
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
    means a current release. ``fsdp_root`` (zero_stage 3 over several GPUs or offloaded):
    ``sharded`` (DeepSpeed ZeRO-3, or FSDP with the embedding and LM head wrapped as their own
    units, as torchtune's ``custom_sharded_layers``) or ``embeddings`` (FSDP auto-wrapping the
    decoder layers, as HF Trainer/accelerate's TRANSFORMER_BASED_WRAP: the embedding, final
    norm and LM head stay in the root unit, which FSDP does not reshard after forward).
    """
    ctx = context(model)
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
        fsdp_root=fsdp_root,
        suggest=suggest,
    )


def _check_positive(name: str, value: Any, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise RunjobError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _estimate(ctx: Ctx, kind: str, g: GPUSpec, **kw: Any) -> MemoryEstimate:
    """Check the settings, dispatch to the engine or training formulas, then add the
    assumptions, the longest trainable sequence and (when it does not fit) suggestions."""
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
    root = (kw.get("fsdp_root") or "sharded").strip().lower()
    if root not in FSDP_ROOTS:
        raise RunjobError(f"unknown fsdp_root {root!r}; use one of {', '.join(FSDP_ROOTS)}")
    kw["fsdp_root"] = root
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
        est = other_engine(ctx, g, **kw)
    elif kind == "inference":
        est = vllm_inference(ctx, g, **kw)
    else:
        est = training(ctx, kind, g, **kw)
    est = attrs.evolve(est, assumptions=assumptions_of(ctx, kind, est, kw))
    if kind != "inference":
        longest = max_seq_len_that_fits(ctx, kind, g, kw)
        est = attrs.evolve(est, breakdown=dict(est.breakdown, max_seq_len_that_fits=longest))
    if kw.get("suggest") and not est.fits:
        est = attrs.evolve(est, suggestions=tuple(suggestions(ctx, kind, g, est, kw, _estimate)))
    return est
