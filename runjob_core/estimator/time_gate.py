"""Pre-flight acts on the time estimate: segments against the time limit, checkpointing, cost.

A job whose work outlasts its time limit runs as several resume segments. That is fine when
it can resume (``resume.auto`` on, and for training a checkpoint cadence ``checkpoint.every``)
and pre-flight warns with the number of segments; when it cannot, every segment after the
first would redo the same work, so pre-flight refuses (``--force`` submits anyway).

The time limit is ``resources.time``, else the partition's MaxTime when the backend reported
it (``data["partition_max_seconds"]`` of its estimate: the SLURM plugin's ``sinfo``). The USD
cost is the time model's GPU-hours at the backend's price (``data["usd_per_hour"]``: RunPod).
Both are joined after every plugin answered (:func:`finish`), so neither side needs the other.
The range and the suggested limit (:mod:`runjob_core.estimator.time_range`) are redone there
against that limit: a job whose limit holds the estimate but not its high end is warned, and one
whose limit is far above the high end is told the shorter limit that would do.
"""

from __future__ import annotations

from typing import Any

import attrs

from runjob_core.errors import RunjobError
from runjob_core.estimator import time_job, time_range, timing
from runjob_core.models import Estimate


def time_estimate(job, cluster, context, source: str) -> Estimate | None:
    """The hook's answer: the ``time`` object and its line (judged by :func:`finish`)."""
    from runjob_core.estimator import time_preflight

    try:
        time = time_preflight.time_for_job(job, cluster, getattr(context, "store", None))
    except RunjobError as exc:
        return Estimate(source=source, summary=f"no time estimate: {exc}", fits=None)
    if time is None:
        return None
    return Estimate(source=source, summary="time: " + time_job.line(time), fits=None, data={"time": time})


def _can_resume(job) -> tuple[bool, str]:
    if not job.resume.auto:
        return False, "resume.auto is off"
    if job.template == "training" and not job.checkpoint.every:
        return False, "a training job without checkpoint.every saves no checkpoint to resume from"
    return True, ""


def _judge(job, e: Estimate, time: dict[str, Any]) -> Estimate:
    summary = "time: " + time_job.line(time)
    data = {**e.data, "time": time}
    advice = time_range.limit_advice(time)
    if not time.get("segments") or time["segments"] <= 1:
        if advice and advice[1]:
            data["warnings"] = [advice[0]]
        elif advice:
            summary += f"; {advice[0]}"
        return attrs.evolve(e, summary=summary, data=data, fits=None)
    needs = (f"the work ({time_job.hms(time['total_seconds'])}) outlasts the {time_job.hms(time['limit_seconds'])} "
             f"time limit{' (the partition MaxTime)' if time.get('limit_from') == 'partition' else ''}: "
             f"{time['segments']} segments")
    ok, why = _can_resume(job)
    if not ok:
        return attrs.evolve(e, summary=f"{summary}; it cannot resume: {why}", data=data, fits=False,
                            suggestions=("set resume.auto: true and checkpoint.every (e.g. 30m)",
                                         f"or ask for resources.time >= {time_job.hms(time['suggested_seconds'])}"
                                         f" ({time['suggested_because']})"))
    if time["segments"] > job.resume.max_timeouts:
        return attrs.evolve(e, summary=f"{summary}; more segments than resume.max_timeouts={job.resume.max_timeouts}",
                            data=data, fits=False,
                            suggestions=(f"raise resume.max_timeouts to >= {time['segments']} or ask for a longer resources.time",))
    data["warnings"] = [f"{needs}, each resumed from the last checkpoint (checkpoint.every "
                        f"{job.checkpoint.every or 'not set'}, resume.auto on, max_timeouts {job.resume.max_timeouts})"]
    most = time.get("segments_max") or time["segments"]
    if most > job.resume.max_timeouts:
        data["warnings"].append(f"at the estimate's high end ({time_job.hms(time['range_seconds'][1])}) the job needs "
                                f"{most} segments, more than resume.max_timeouts={job.resume.max_timeouts}: raise it to "
                                f"{most} so that a slower run is not stopped before the work is done")
    return attrs.evolve(e, summary=summary, data=data, fits=None)


def finish(job, estimates) -> list[Estimate]:
    """Every estimate, the time one joined with the backend's price and partition limit, and judged."""
    out = list(estimates)
    prices = [e.data["usd_per_hour"] for e in out if isinstance(e.data.get("usd_per_hour"), dict) and e.data["usd_per_hour"]]
    partition = [e.data["partition_max_seconds"] for e in out if isinstance(e.data.get("partition_max_seconds"), (int, float))]
    for i, e in enumerate(out):
        time = e.data.get("time")
        if not isinstance(time, dict):
            continue
        time = dict(time)
        if time.get("limit_seconds") is None and partition:
            time.update(limit_seconds=float(partition[0]), limit_from="partition")
        if time.get("total_seconds") is not None:
            time["segments"] = timing.segments_for(time["total_seconds"], time.get("limit_seconds"))
            time_range.apply_range(time)
            time_range.suggest_limit(time, partition[0] if partition else None)
            if prices:
                per_hour = max(prices[0].values())  # the dearest affordable type: the backend's own bound
                time.update(usd=round(per_hour * time["total_seconds"] / 3600.0, 2), usd_per_hour=per_hour)
        out[i] = _judge(job, e, time)
    return out
