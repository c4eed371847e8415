"""What to change when a job does not fit: more GPUs, tensor parallelism, a bigger GPU,
quantization, checkpointing, sharding, a smaller model of the same family. Each suggestion is
an estimate that was run and fits, not a rule of thumb."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runjob_core.errors import RunjobError
from runjob_core.estimator.catalog import MODELS, find_model
from runjob_core.estimator.gpus import GPUS, GPUSpec
from runjob_core.estimator.record import Ctx, MemoryEstimate, context
from runjob_core.estimator.resolve import ResolvedModel



#: The estimate itself (``memory._estimate``), run again with other settings: handed in by
#: the caller so this module stays below the one that calls it.
Again = Callable[..., MemoryEstimate]


def _try(again: Again, ctx: Ctx, kind: str, g: GPUSpec, kw: dict[str, Any], **over: Any) -> MemoryEstimate | None:
    k = dict(kw)
    k.update(over)
    k["suggest"] = False
    try:
        return again(ctx, kind, g, **k)
    except RunjobError:
        return None


def _same_family_smaller(ctx: Ctx) -> list[Any]:
    spec = ctx.resolved.spec or find_model(ctx.resolved.name)
    if spec is None:
        return []
    smaller = [m for m in MODELS if m.family == spec.family and m.published_params < ctx.counts["total"]]
    return sorted(smaller, key=lambda m: -m.published_params)


def suggestions(ctx: Ctx, kind: str, g: GPUSpec, est: MemoryEstimate, kw: dict[str, Any], again: Again) -> list[str]:
    out: list[str] = []
    a = ctx.arch
    bigger = sorted((x for x in GPUS if x.total_bytes > g.total_bytes), key=lambda x: x.total_bytes)
    if kind == "inference" and kw["engine"] == "hf":
        for n in (2, 4, 8):
            if n <= est.num_gpus:
                continue
            e = _try(again, ctx, kind, g, kw, num_gpus=n)
            if e and e.fits:
                out.append(f"spread the layers over {n} x {g.name} (device_map='auto'), "
                           f"{e.total_gib:.1f} GiB per GPU; or serve it with engine vllm/sglang and tp={n}")
                break
        else:
            out.append(f"does not fit on up to 8 x {g.name} with device_map='auto'; use a larger GPU or a quantized checkpoint")
        for x in bigger:
            e = _try(again, ctx, kind, x, kw)
            if e and e.fits:
                out.append(f"or {est.num_gpus} x {x.name} ({x.total_gib:.1f} GiB)")
                break
        if kw["dtype"] in ("bf16", "fp16", "fp32"):
            for q in ("fp8", "int4"):
                e = _try(again, ctx, kind, g, kw, dtype=q)
                if e and e.fits:
                    out.append(f"or load a {q} quantized checkpoint on the same {est.num_gpus} GPU(s)")
                    break
    elif kind == "inference":
        tp0 = est.tp
        for t in (2, 4, 8, 16):
            if t <= tp0 or a.heads % t:
                continue
            e = _try(again, ctx, kind, g, kw, tp=t, num_gpus=t)
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
            e = _try(again, ctx, kind, x, kw, tp=tp0, num_gpus=est.num_gpus)
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
            e = _try(again, ctx, kind, g, kw, gpu_memory_utilization=0.95)
            if e and e.fits:
                out.append("or raise gpu_memory_utilization to 0.95")
        if kw["dtype"] in ("bf16", "fp16", "fp32"):
            for q in ("fp8", "int4"):
                e = _try(again, ctx, kind, g, kw, dtype=q)
                if e and e.fits:
                    out.append(f"or serve a {q} quantized checkpoint on the same {est.num_gpus} GPU(s)")
                    break
    else:
        n0 = est.num_gpus
        ckpt = kw["grad_checkpointing"]
        if not ckpt:
            e = _try(again, ctx, kind, g, kw, grad_checkpointing=True)
            if e and e.fits:
                out.append(f"enable gradient checkpointing ({e.total_gib:.1f} GiB per GPU)")
        found = False
        for extra_ckpt in ((False, True) if not ckpt else (False,)):
            for n in (2, 4, 8, 16, 32, 64):
                if n < n0 or (n == n0 and kw["zero_stage"] == 3):
                    continue
                e = _try(again, ctx, kind, g, kw, num_gpus=n, zero_stage=3, grad_checkpointing=ckpt or extra_ckpt)
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
            e = _try(again, ctx, kind, g, kw, batch=1)
            if e and e.fits:
                out.append("or use micro-batch 1 with gradient accumulation")
        alt = {"full_ft": ("lora", "qlora"), "lora": ("qlora",), "qlora": ()}[kind]
        for k2 in alt:
            e = _try(again, ctx, k2, g, kw)
            if e and e.fits:
                out.append(f"or train with {k2} ({e.total_gib:.1f} GiB per GPU)")
                break
        for x in bigger:
            e = _try(again, ctx, kind, x, kw)
            if e and e.fits:
                out.append(f"or {est.num_gpus} x {x.name} ({x.total_gib:.1f} GiB)")
                break
        else:
            if bigger:
                out.append(f"no GPU type in the table fits it with {est.num_gpus} GPU(s) at these settings")
    for m in _same_family_smaller(ctx):
        e = _try(again, context(ResolvedModel(m.name, dict(m.config), "table", m.source, m)), kind, g, kw)
        if e and e.fits:
            out.append(f"or a smaller model of the same family: {m.name}")
            break
    if out and out[0].startswith("or "):
        out[0] = out[0][3:]
    return out
