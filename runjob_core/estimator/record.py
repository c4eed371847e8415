"""The record of one memory estimate and the model context every formula reads.

:class:`MemoryEstimate` is what :func:`runjob_core.estimator.memory.estimate` returns (GiB,
per GPU unless a field says otherwise); :class:`Ctx` is the resolved model, its
architecture and its parameter counts; the byte-size helpers turn parameter counts into
weight bytes per dtype.
"""

from __future__ import annotations

from typing import Any

import attrs

from runjob_core.errors import RunjobError
from runjob_core.estimator.arch import Arch, arch_from_config, count_params
from runjob_core.estimator.constants import DTYPE_BYTES, DTYPES, INT4_GROUP_BYTES_PER_PARAM, NF4_DQ_BYTES_PER_PARAM
from runjob_core.estimator.gpus import GIB
from runjob_core.estimator.resolve import ResolvedModel, resolve_model


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


def gib(x: float) -> float:
    return x / GIB


@attrs.frozen
class Ctx:
    resolved: ResolvedModel
    arch: Arch
    counts: dict[str, int] = attrs.field(eq=False)


def context(model: str | ResolvedModel) -> Ctx:
    r = model if isinstance(model, ResolvedModel) else resolve_model(model)
    a = arch_from_config(r.config, source=r.source)
    return Ctx(r, a, count_params(a))


def settings_of(kw: dict[str, Any], **over: Any) -> dict[str, Any]:
    s = {k: v for k, v in kw.items() if k != "suggest"}
    if isinstance(s.get("lora_targets"), tuple):
        s["lora_targets"] = list(s["lora_targets"])
    s.update(over)
    return s


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
