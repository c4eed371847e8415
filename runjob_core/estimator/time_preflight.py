"""The ``time`` object: one rate (first principles or measured here), the work, the segments.

Shared by ``runjob estimate`` (arguments from the command line) and pre-flight (arguments
from the job spec, :func:`time_for_job`). Its keys: ``tokens_per_s`` (training: per GPU;
inference: generated tokens per second of the whole job, prefill included),
``seconds_per_step`` (training), ``total_seconds`` and ``segments`` (None when the work is
unknown), ``bound`` (compute | memory | overhead | communication), ``assumptions``,
``source`` (first-principles | measured | calibrated), and ``gpu_hours`` / ``usd`` when known;
``range_factor``, ``tokens_per_s_range``, ``range_seconds`` and ``segments_max`` (how sure it is)
and ``suggested_seconds`` (the limit to ask for), :mod:`runjob_core.estimator.time_range`.
"""

from __future__ import annotations

from typing import Any

from runjob_core.estimator import decoding, time_range, timing
from runjob_core.estimator.gpu_peaks import peaks_for


def time_object(est, model: str, *, work: dict[str, Any], limit_seconds: float | None = None,
                framework: str = "hf", precision: str = "bf16", grad_accum: int = 1, nodes: int = 1,
                measured: dict[str, Any] | None = None, transformers_version: str | None = None,
                calibrated: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``time`` object of memory estimate *est* of *model* for *work* (see :mod:`time_job`)."""
    from runjob_core.estimator.arch import arch_from_config
    from runjob_core.estimator.resolve import resolve_model

    resolved = resolve_model(model)
    arch = arch_from_config(resolved.config, source=resolved.source)
    peaks = peaks_for(est.gpu)
    s = est.settings
    if est.kind == "inference":
        rate = decoding.inference_rate(est, arch, peaks, engine=est.engine, input_tokens=work.get("input_tokens", 512.0),
                                     output_tokens=work.get("output_tokens", 512.0), batch=int(s.get("concurrency") or 1),
                                     rows=work.get("rows"), max_num_seqs=int(s.get("max_num_seqs") or 256),
                                     longest_output_tokens=work.get("longest_output_tokens"),
                                     transformers_version=transformers_version)
    else:
        rate = timing.training_rate(est, arch, peaks, kind=est.kind, seq_len=int(s.get("seq_len") or 2048),
                                    micro_batch=int(s.get("batch") or 1), grad_accum=grad_accum, framework=framework,
                                    grad_checkpointing=bool(s.get("grad_checkpointing")),
                                    zero_stage=int(s.get("zero_stage") or 0), nodes=nodes,
                                    tp=int(s.get("tp") or 1) if framework in ("megatron", "nemo") else 1,
                                    precision=precision, master_weights=bool(s.get("master_weights", True)),
                                    compiled=bool(s.get("torch_compile")), nf4_backend=str(s.get("nf4_backend") or "bnb"))
    out: dict[str, Any] = {"kind": est.kind, "tokens_per_s": rate.tokens_per_s, "seconds_per_step": rate.seconds_per_step
                           if est.kind != "inference" else None, "total_seconds": None, "segments": None,
                           "bound": rate.bound, "assumptions": list(rate.assumptions), "source": "first-principles",
                           "efficiency": rate.efficiency, "first_principles_tokens_per_s": round(rate.tokens_per_s, 1)}
    if measured:
        out.update(tokens_per_s=measured["tokens_per_s"], source="measured", efficiency=None)
        if out["seconds_per_step"] and rate.tokens_per_step:
            out["seconds_per_step"] = rate.tokens_per_step / measured["tokens_per_s"]
        out["assumptions"].insert(0, f"measured on this cluster: {measured['tokens_per_s']:,.0f} tokens/s by job "
                                     f"{measured['job']} ({measured['name']}, from {measured['from']})")
    elif calibrated:
        scaled = rate.tokens_per_s * calibrated["factor"]
        out.update(tokens_per_s=scaled, source="calibrated", calibration=round(calibrated["factor"], 3))
        if out["seconds_per_step"] and rate.tokens_per_step:
            out["seconds_per_step"] = rate.tokens_per_step / scaled
        runs = calibrated["runs"]
        out["assumptions"].insert(0, f"calibrated on this cluster: x{calibrated['factor']:.2f}, the median measured / "
                                     f"first-principles rate of {runs} earlier run{'s' if runs != 1 else ''} of "
                                     f"{calibrated['what']} on {calibrated['gpu']} ({', '.join(calibrated['names'])})")
    out["assumptions"].append("work: " + work.get("counted", "unknown"))
    tokens = work.get("tokens")
    if tokens:
        if est.kind == "inference":
            total = tokens / out["tokens_per_s"]
        else:  # per-GPU rate x the GPUs that share the work (tensor parallel ranks share tokens)
            total = tokens / (out["tokens_per_s"] * est.num_gpus)
        out.update(total_seconds=total, segments=timing.segments_for(total, limit_seconds),
                   gpu_hours=total * est.num_gpus / 3600.0)
    out["limit_seconds"] = limit_seconds
    out["tokens_per_s"] = round(out["tokens_per_s"], 1)
    time_range.apply_range(out)
    time_range.suggest_limit(out)
    return out


def time_for_job(job, cluster, store) -> dict[str, Any] | None:
    """The ``time`` object of *job* on *cluster* (None when it names no model or GPUs)."""
    from runjob_core.config import parse_duration
    from runjob_core.estimator import estimate, jobspec, rates, time_job

    args = jobspec.estimate_args(job, cluster)
    if args is None:
        return None
    model, kind, gpu, kw = args
    est = estimate(model, kind, gpu, suggest=False, **kw)
    framework = job.params.get("framework") or "hf"
    if framework not in timing.FRAMEWORK_EFFICIENCY:
        known = ", ".join(sorted(timing.FRAMEWORK_EFFICIENCY))
        from runjob_core.errors import RunjobError

        raise RunjobError(f"invalid {framework!r} at $.params.framework in {job.source}: use one of {known}")
    precision = job.params.get("precision") or "bf16"
    if precision not in ("bf16", "fp16", "fp8", "fp32"):
        from runjob_core.errors import RunjobError

        raise RunjobError(f"invalid {precision!r} at $.params.precision in {job.source}: use bf16, fp16, fp8 or fp32")
    work = time_job.work_of(job, kind, est.num_gpus, est.tp if kind == "inference" else 1)
    limit = float(parse_duration(job.resources.time)) if job.resources.time else None
    found = rates.records(store) if store is not None else []
    seen = rates.lookup(store, est, found=found) if found else None
    calibrated = rates.calibration(store, est, framework, found=found) if found and seen is None else None
    grad_accum = time_job.positive(job, "gradient_accumulation_steps", "grad_accum") or 1
    version = job.params.get("transformers_version")
    if version is not None and not (isinstance(version, str) and version[:1].isdigit()):
        from runjob_core.errors import RunjobError

        raise RunjobError(f"invalid {version!r} at $.params.transformers_version in {job.source}: use a version "
                          "string such as '4.51.3'")
    return time_object(est, model, work=work, limit_seconds=limit, framework=framework, precision=precision,
                       grad_accum=grad_accum, nodes=job.resources.nodes, measured=seen, transformers_version=version,
                       calibrated=calibrated)
