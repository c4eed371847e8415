"""The memory estimate of pre-flight (called by ``runjob_core.defaults.runjob_estimate``)."""

from __future__ import annotations

from runjob_core.errors import RunjobError
from runjob_core.models import Estimate


def memory_estimate(job, cluster, context, source: str) -> Estimate | None:
    """Estimate with the job's own engine and flags; the summary carries the breakdown
    (weights, KV, activations, optimizer, overhead) against the GPU's memory, and what an
    earlier run of the same model and settings measured on this cluster, if any."""
    from runjob_core.estimator import estimate, jobspec, measured

    try:
        args = jobspec.estimate_args(job, cluster)
        if args is None:
            return None
        model, kind, gpu, kw = args
        result = estimate(model, kind, gpu, **kw)
    except RunjobError as exc:
        return Estimate(source=source, summary=f"no memory estimate: {exc}", fits=None)
    data = result.to_json()
    how = kind if kind != "inference" else f"inference ({data['engine']})"
    summary = f"{data['model']} {how} on {data['num_gpus']} x {data['gpu']}: {jobspec.breakdown_line(data)}"
    # the assumptions that decided the figures, one indented line each under the summary
    summary += "".join(f"\n    assumes: {line}" for line in result.assumptions)
    store = getattr(context, "store", None)
    seen = measured.lookup(store, result) if store is not None else None
    if seen:
        data["measured"] = seen
        summary += "; " + measured.describe(seen)
    return Estimate(source=source, summary=summary, fits=bool(data["fits"]), suggestions=tuple(data["suggestions"]), data=data)
