"""Before any pod: the cost estimate of pre-flight and the rows of ``runjob clusters check``.

Neither creates a pod: both read the GPU catalog (one authenticated GET, which is also
the check that the key is accepted).
"""

from __future__ import annotations

from typing import Any

from runjob_core.config import parse_duration
from runjob_core.errors import RunjobError
import attrs

from runjob_core.models import Estimate
from runjob_runpod import _settings
from runjob_runpod._pods import SOURCE, _gpu_count, _public_key, client_for, settings_for


def _cost_estimate(job, cluster, context, catalog) -> Estimate | None:
    """Price per hour of the first affordable GPU type x GPUs x time limit, against the budget."""
    settings = settings_for(cluster, context)
    unknown = [g for g in settings.gpu_types if g not in catalog]
    if unknown:
        return Estimate(source=SOURCE, fits=False, summary=f"GPU type {unknown[0]!r} is not in RunPod's catalog",
                        suggestions=(f"use ids from the catalog, e.g. {', '.join(sorted(catalog)[:4])}",))
    count = _gpu_count(job)
    per_hour = {g: catalog[g].price(settings.request_cloud) * count for g in settings.gpu_types}
    affordable = [g for g in settings.gpu_types if settings.max_usd_per_hour is None or per_hour[g] <= settings.max_usd_per_hour]
    if not affordable:
        cheapest = min(per_hour.values())
        return Estimate(source=SOURCE, fits=False, data={"usd_per_hour": per_hour},
                        summary=f"every GPU type costs more than max_usd_per_hour={settings.max_usd_per_hour:g} "
                                f"for {count} GPU(s) (cheapest ${cheapest:.2f}/h)",
                        suggestions=("raise max_usd_per_hour, ask for fewer GPUs or list a cheaper GPU type",))
    # The dearest affordable type bounds what the job can cost whichever one has capacity.
    worst = max(per_hour[g] for g in affordable)
    data: dict[str, Any] = {"usd_per_hour": {g: per_hour[g] for g in affordable}, "gpus": count,
                            "vram_gb": {g: catalog[g].memory_gb for g in affordable}}
    if not job.resources.time:
        if settings.max_usd_total is not None:
            return Estimate(source=SOURCE, fits=False, data=data,
                            summary=f"no time limit, so the cost is unbounded (${worst:.2f}/h) against max_usd_total="
                                    f"{settings.max_usd_total:g}", suggestions=("set resources.time",))
        return Estimate(source=SOURCE, fits=None, data=data, summary=f"${worst:.2f}/h on RunPod, no time limit set")
    hours = parse_duration(job.resources.time) / 3600.0
    total = worst * hours
    data["usd_max_total"] = round(total, 2)
    if settings.max_usd_total is not None:  # shared by a sweep's elements on this cluster (runjob_core.sweep._budget)
        data["usd_budget_total"] = settings.max_usd_total
    summary = f"up to ${total:.2f} on RunPod (${worst:.2f}/h x {hours:g} h time limit, {count} GPU(s))"
    if settings.max_usd_total is not None and total > settings.max_usd_total:
        return Estimate(source=SOURCE, fits=False, data=data, summary=f"{summary}: over max_usd_total={settings.max_usd_total:g}",
                        suggestions=("shorten resources.time, use a cheaper GPU type, or raise max_usd_total",))
    return Estimate(source=SOURCE, fits=True, data=data, summary=summary)


def check_cluster(cluster, context) -> list:
    """Key accepted (one GET), SSH key pair readable, GPU types in the catalog, budget set."""
    from runjob_core.models import CheckResult

    def row(check: str, ok: bool, detail: str, fix: str | None = None) -> CheckResult:
        return CheckResult(check=check, ok=ok, detail=detail, source=SOURCE, fix=None if ok else fix)

    try:
        settings = settings_for(cluster, context)
    except RunjobError as exc:
        return [row("settings", False, str(exc), f"fix the runpod keys of {cluster.name} in {cluster.source}")]
    rows = [row("settings", True, f"{len(settings.gpu_types)} GPU type(s), cloud {settings.cloud}")]
    try:
        catalog = {g.id: g for g in client_for(cluster, context, settings).gpu_types()}
        rows.append(row("API key", True, f"${settings.api_key_env} accepted by {settings.api_url}"))
    except RunjobError as exc:
        rows.append(row("API key", False, str(exc), f"export a valid key as {settings.api_key_env}"))
        catalog = None
    try:
        _public_key(settings, cluster)
        rows.append(row("SSH key", True, f"{_settings.identity_file(cluster)} and its .pub are readable"))
    except RunjobError as exc:
        rows.append(row("SSH key", False, str(exc), f"set clusters.{cluster.name}.identity_file to a key pair"))
    if catalog is not None:
        unknown = [g for g in settings.gpu_types if g not in catalog]
        rows.append(row("GPU types", not unknown,
                        ", ".join(f"{g} (${catalog[g].price(settings.request_cloud):.2f}/h, {catalog[g].memory_gb} GB)"
                                  for g in settings.gpu_types if g in catalog) if not unknown else f"not in the catalog: {', '.join(unknown)}",
                        f"use catalog ids, e.g. {', '.join(sorted(catalog)[:3])}"))
    budget = settings.max_usd_total is not None and settings.max_usd_per_hour is not None
    rows.append(row("budget", budget, f"max ${settings.max_usd_per_hour}/h, ${settings.max_usd_total} per job",
                    f"set max_usd_per_hour and max_usd_total in clusters.{cluster.name}"))
    return rows



def estimate(job, cluster, context) -> Estimate | None:
    """The cost against the budget, and (when neither the job nor the cluster names a GPU
    type) the memory estimate on the smallest GPU of the affordable ``gpu_types``: the pod
    may land on any of them."""
    settings = settings_for(cluster, context)
    catalog = {g.id: g for g in client_for(cluster, context, settings).gpu_types()}
    cost = _cost_estimate(job, cluster, context, catalog)
    if cost is None or cost.fits is False or job.resources.gpu_type or cluster.gpu_type:
        return cost  # a GPU type named in the job or cluster: the core's memory estimate uses it
    candidates = list(cost.data.get("usd_per_hour", {}))
    if not candidates:
        return cost
    smallest = min(candidates, key=lambda g: catalog[g].memory_gb)
    from runjob_core.estimator import preflight

    memory = preflight.memory_estimate(job, attrs.evolve(cluster, gpu_type=smallest), context, SOURCE)
    if memory is None or memory.fits is None:
        return cost
    data = {**cost.data, "memory": memory.data, "memory_gpu": smallest}
    if memory.fits is False:
        bigger = [g for g in candidates if catalog[g].memory_gb > catalog[smallest].memory_gb]
        hint = f"drop {smallest} from gpu_types (keep {', '.join(bigger)})" if bigger else "list GPU types with more memory"
        return Estimate(source=SOURCE, fits=False, data=data, summary=f"{memory.summary} (on {smallest}, the smallest of gpu_types)",
                        suggestions=(hint, *memory.suggestions))
    return attrs.evolve(cost, summary=f"{cost.summary}; memory on {smallest}: {memory.summary}", data=data)
