"""Pre-flight acts on the time estimate: segments against the time limit, checkpointing, cost.

A job whose work outlasts its time limit runs as several resume segments. That is fine when
it can resume (``resume.auto`` on, and for training a checkpoint cadence ``checkpoint.every``)
and pre-flight says how many segments; when it cannot, every segment after the first would
redo the same work, so pre-flight refuses (``--force`` submits anyway).

The USD cost is joined in after every plugin answered (:func:`with_cost`): the time comes
from the core, the price per hour from the backend's own estimate (RunPod's
``usd_per_hour``), and neither needs to know the other.
"""

from __future__ import annotations

from typing import Any

from runjob_core.errors import RunjobError
from runjob_core.models import Estimate


def _can_resume(job) -> tuple[bool, str]:
    if not job.resume.auto:
        return False, "resume.auto is off"
    if job.template == "training" and not job.checkpoint.every:
        return False, "a training job without checkpoint.every saves no checkpoint to resume from"
    return True, ""


def time_estimate(job, cluster, context, source: str) -> Estimate | None:
    from runjob_core.estimator import time_job, time_preflight

    try:
        time = time_preflight.time_for_job(job, cluster, getattr(context, "store", None))
    except RunjobError as exc:
        return Estimate(source=source, summary=f"no time estimate: {exc}", fits=None)
    if time is None:
        return None
    summary = "time: " + time_job.line(time)
    data: dict[str, Any] = {"time": time}
    if time["segments"] and time["segments"] > 1:
        ok, why = _can_resume(job)
        needs = (f"the work ({time_job.hms(time['total_seconds'])}) outlasts the {time_job.hms(time['limit_seconds'])} "
                 f"time limit: {time['segments']} segments")
        if not ok:
            data["tail"] = f"; it cannot resume: {why}"
            return Estimate(source=source, summary=summary + data["tail"], fits=False, data=data,
                            suggestions=("set resume.auto: true and checkpoint.every (e.g. 30m)",
                                         f"or ask for resources.time >= {time_job.hms(time['total_seconds'] * 1.2)}"))
        data["warnings"] = [f"{needs}, each resumed from the last checkpoint (checkpoint.every "
                            f"{job.checkpoint.every or 'not set'}, resume.auto on, max_timeouts {job.resume.max_timeouts})"]
        if time["segments"] > job.resume.max_timeouts:
            data["tail"] = f"; more segments than resume.max_timeouts={job.resume.max_timeouts}"
            return Estimate(source=source, summary=summary + data["tail"], fits=False, data=data,
                            suggestions=(f"raise resume.max_timeouts to >= {time['segments']} or ask for a longer resources.time",))
    return Estimate(source=source, summary=summary, fits=None, data=data)


def with_cost(estimates: tuple[Estimate, ...] | list[Estimate]) -> list[Estimate]:
    """The time estimate with the USD cost of its GPU-hours at the backend's price, if one gave it."""
    import attrs

    prices = [e.data["usd_per_hour"] for e in estimates if isinstance(e.data.get("usd_per_hour"), dict) and e.data["usd_per_hour"]]
    out = list(estimates)
    if not prices:
        return out
    per_hour = max(prices[0].values())  # the dearest affordable type, as the backend's own bound
    for i, e in enumerate(out):
        time = e.data.get("time")
        if not time or time.get("total_seconds") is None:
            continue
        from runjob_core.estimator import time_job

        time = {**time, "usd": round(per_hour * time["total_seconds"] / 3600.0, 2), "usd_per_hour": per_hour}
        out[i] = attrs.evolve(e, data={**e.data, "time": time}, summary="time: " + time_job.line(time) + e.data.get("tail", ""))
    return out
