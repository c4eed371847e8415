"""From a job spec to the estimator's arguments, and the pre-flight summary line.

Pre-flight (``runjob_core.defaults.runjob_estimate``) and the measured-memory record
(:mod:`runjob_core.estimator.measured`) both read the job the same way, so the estimate a
job is compared with after it ran is the one pre-flight showed.

Which estimate: template ``training`` -> ``params.method`` (full_ft, lora, qlora; default
full_ft); template ``vllm`` -> inference with ``model.engine`` (default vllm); any other
template with a model and GPUs -> inference with ``model.engine`` (default hf, a
transformers ``generate`` loop). ``params`` keys read (all optional):

==========================  =====================================================
tensor_parallel_size        vLLM/SGLang tensor parallelism (default: all GPUs)
concurrency / batch_size    sequences generated at once (inference)
seq_len, micro_batch_size   training tokens per sequence and per-GPU micro-batch
zero_stage, cpu_offload     ZeRO/FSDP sharding stage, ZeRO-Offload / FSDP CPU offload
gradient_checkpointing      activation checkpointing (training)
optimizer, pure_bf16        adamw|adamw_fused|adamw_single|adamw8bit|paged_adamw8bit|adafactor|sgd; no fp32 master copy
lora_rank, lora_targets     LoRA rank and target modules (list or comma-separated)
lora_dropout                LoRA dropout (default 0.05)
gpu_memory_utilization      vLLM memory fraction (default 0.9)
enforce_eager               vLLM without CUDA graphs
max_num_batched_tokens      vLLM profile size / SGLang chunked prefill
max_num_seqs                vLLM max_num_seqs (default 256)
mem_fraction_static         SGLang's static memory fraction (default 0.85)
kv_cache_dtype              auto|fp8|bf16|fp16|fp32
==========================  =====================================================
"""

from __future__ import annotations

from typing import Any

from runjob_core.errors import RunjobError
from runjob_core.estimator.vllm_versions import parse_version

ENGINES = ("vllm", "hf", "sglang")
_KIND_OF_TEMPLATE = {"vllm": "inference", "training": "full_ft"}


def _bad(job, key: str, value: Any, want: str) -> RunjobError:
    return RunjobError(f"invalid {value!r} at $.{key} in {job.source}: {want}")


def _int(job, key: str, minimum: int = 0) -> int | None:
    value = job.params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _bad(job, f"params.{key}", value, f"use an integer >= {minimum}")
    return value


def _float(job, key: str) -> float | None:
    value = job.params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value <= 1):
        raise _bad(job, f"params.{key}", value, "use a number in (0, 1]")
    return float(value)


def _bool(job, key: str) -> bool | None:
    value = job.params.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise _bad(job, f"params.{key}", value, "use true or false")
    return value


def _str(job, key: str) -> str | None:
    value = job.params.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _bad(job, f"params.{key}", value, "use a name")
    return value.strip()


def _targets(job) -> tuple[str, ...] | None:
    value = job.params.get("lora_targets")
    if value is None:
        return None
    if isinstance(value, str):
        value = [v for v in (x.strip() for x in value.split(",")) if v]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise _bad(job, "params.lora_targets", value, "use a list of module names, e.g. [q_proj, v_proj]")
    return tuple(value)


def engine_of(job) -> str:
    engine = job.model.engine or ("vllm" if job.template == "vllm" else "hf")
    if engine not in ENGINES:
        raise _bad(job, "model.engine", engine, f"use one of {', '.join(ENGINES)}")
    return engine


def estimate_args(job, cluster) -> tuple[str, str, str, dict[str, Any]] | None:
    """(model, kind, gpu, keyword arguments of ``estimate``) for *job*, or None when the job
    names no model or no GPUs. Bad values raise :class:`RunjobError` naming the key."""
    model = job.model.path or job.model.name
    gpu = job.resources.gpu_type or cluster.gpu_type
    if not (model and gpu and job.resources.gpus > 0):
        return None
    if job.template == "training":
        method = job.params.get("method")
        if method is not None and method not in ("full_ft", "lora", "qlora"):
            raise _bad(job, "params.method", method, "use full_ft, lora or qlora")
        kind = method or "full_ft"
    else:
        kind = _KIND_OF_TEMPLATE.get(job.template, "inference")
    kw: dict[str, Any] = {
        "num_gpus": job.resources.gpus,
        "dtype": job.model.dtype or "bf16",
        "max_model_len": job.model.max_model_len,
        "tp": _int(job, "tensor_parallel_size", 1),
        "concurrency": _int(job, "concurrency", 1) or _int(job, "batch_size", 1) or 1,
        "seq_len": _int(job, "seq_len", 1) or 2048,
        "batch": _int(job, "micro_batch_size", 1) or _int(job, "batch_size", 1) or 1,
        "zero_stage": _int(job, "zero_stage") or 0,
        "grad_checkpointing": bool(_bool(job, "gradient_checkpointing")),
        "gpu_memory_utilization": _float(job, "gpu_memory_utilization") or 0.9,
        "enforce_eager": bool(_bool(job, "enforce_eager")),
        "max_num_batched_tokens": _int(job, "max_num_batched_tokens", 1),
        "max_num_seqs": _int(job, "max_num_seqs", 1) or 256,
        "mem_fraction_static": _float(job, "mem_fraction_static"),
        "kv_cache_dtype": _str(job, "kv_cache_dtype") or "auto",
        "lora_rank": _int(job, "lora_rank", 1) or 16,
        "lora_targets": _targets(job),
        "optimizer": _str(job, "optimizer") or "adamw",
        "cpu_offload": bool(_bool(job, "cpu_offload")),
        "master_weights": not _bool(job, "pure_bf16"),
        "optimizer_in_bwd": bool(_bool(job, "optimizer_in_bwd")),
        "torch_compile": bool(_bool(job, "compile")),
    }
    for key, allowed in (("loss", ("standard", "chunked", "fused")), ("nf4_backend", ("bnb", "torchao")),
                         ("hf_prompt_logits", ("last", "all")),
                         ("fsdp_root", ("sharded", "embeddings"))):
        value = _str(job, key)
        if value is not None:
            if value not in allowed:
                raise _bad(job, f"params.{key}", value, f"use {', '.join(allowed)}")
            kw[key] = value
    vllm_version = job.params.get("vllm_version")
    if vllm_version is not None:
        try:
            parse_version(str(vllm_version))
        except RunjobError:
            raise _bad(job, "params.vllm_version", vllm_version, "write the release as pip shows it, e.g. 0.6.3") from None
        kw["vllm_version"] = str(vllm_version)
    dropout = job.params.get("lora_dropout")
    if dropout is not None:
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not (0 <= dropout < 1):
            raise _bad(job, "params.lora_dropout", dropout, "use a number in [0, 1)")
        kw["lora_dropout"] = float(dropout)
    if kind == "inference":
        kw["engine"] = engine_of(job)
    return model, kind, gpu, kw


def breakdown_line(data: dict[str, Any]) -> str:
    """'weights 15.0 + KV 6.2 + activations 1.3 + optimizer 0.0 + overhead 1.6 = 24.1 GiB of 79.2 GiB'."""
    parts = [("weights", data["weights_gib"])]
    if data["kind"] == "inference":
        parts.append(("KV", data["kv_cache_gib"]))
    parts.append(("activations", data["activations_gib"]))
    if data["kind"] != "inference":
        parts += [("gradients", data["gradients_gib"]), ("optimizer", data["optimizer_gib"])]
    parts.append(("overhead", data["overhead_gib"]))
    text = " + ".join(f"{name} {value:.1f}" for name, value in parts)
    room = data.get("breakdown", {}).get("kv_available_gib")
    if data["kind"] == "inference" and room is not None:
        # vLLM/SGLang reserve their KV pool up front: the total is the pool, not the need
        text = text.replace(f"KV {data['kv_cache_gib']:.1f}", f"KV {data['kv_cache_gib']:.1f} (pool {max(0.0, room):.1f})")
    extra = []
    if data.get("offloaded_gib"):
        extra.append(f"{data['offloaded_gib']:.1f} GiB offloaded to host RAM")
    if data.get("paged_gib"):
        extra.append(f"{data['paged_gib']:.1f} GiB paged optimizer states")
    tail = f" ({'; '.join(extra)})" if extra else ""
    return f"{text} = {data['total_gib']:.1f} GiB of {data['gpu_vram_gib']:.1f} GiB per GPU{tail}"
