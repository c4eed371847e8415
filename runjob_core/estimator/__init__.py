"""Pre-flight GPU memory and wall-time estimator (stdlib + attrs; no torch, no network).

Public API::

    estimate(model, kind, gpu, *, num_gpus=1, tp=None, dtype="bf16", max_model_len=None,
             concurrency=1, seq_len=2048, batch=1, zero_stage=0, grad_checkpointing=False,
             gpu_memory_utilization=0.9, engine="vllm", optimizer="adamw", cpu_offload=False,
             master_weights=True, lora_targets=None, ...) -> MemoryEstimate

Modules: ``memory`` (vLLM inference, training, suggestions), ``engines`` (hf, sglang),
``arch`` (config.json arithmetic, LoRA targets), ``catalog`` (built-in model table),
``gpus``, ``resolve`` (finding a config.json), ``jobspec`` (job spec -> arguments),
``preflight`` (the pre-flight hook's estimate), ``measured`` (learning from runs),
``walltime``.
    estimate_walltime(samples, throughput_per_s, requested_seconds=None,
                      partition_limit_seconds=None) -> dict

Time: ``timing`` (the first-principles training rate), ``decoding`` (inference: prefill and the
decode step by engine), ``gpu_peaks`` (dense FLOP/s, HBM, links), ``time_range`` (the range and the
limit to ask for),
``time_job`` (the work a spec states, the one-line text), ``time_preflight`` (the ``time``
object), ``time_gate`` (segments, refusal, cost), ``rates`` (rates learned at collect),
``eta`` (a running job's ETA).
"""

from __future__ import annotations

from runjob_core.estimator.arch import Arch, arch_from_config, count_params, kv_bytes_per_token
from runjob_core.estimator.gpus import GPUS, GPUSpec, lookup_gpu
from runjob_core.estimator.memory import DTYPES, KINDS, MemoryEstimate, estimate
from runjob_core.estimator.catalog import MODELS, ModelSpec, find_model
from runjob_core.estimator.resolve import ResolvedModel, resolve_model
from runjob_core.estimator.walltime import estimate_walltime

__all__ = [
    "Arch",
    "DTYPES",
    "GPUS",
    "GPUSpec",
    "KINDS",
    "MODELS",
    "MemoryEstimate",
    "ModelSpec",
    "ResolvedModel",
    "arch_from_config",
    "count_params",
    "estimate",
    "estimate_walltime",
    "find_model",
    "kv_bytes_per_token",
    "lookup_gpu",
    "resolve_model",
]
