"""Pre-flight time estimate: how long the job will run, from its sample count and the
throughput of earlier runs with the same name (kept in the state store), or a
``params.throughput_per_s`` the user gives; compared with the requested time limit."""

from __future__ import annotations

import pluggy

from runjob_core.config import format_slurm_time, parse_duration
from runjob_core.models import Estimate

hookimpl = pluggy.HookimplMarker("runjob")
SOURCE = "runjob-core"
#: params keys read as the job's number of samples (rows) to process.
SAMPLE_KEYS = ("num_samples", "samples", "n_samples_total", "rows")


def _samples(job) -> int | None:
    for key in SAMPLE_KEYS:
        value = job.params.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return None


def measured_throughput(store, name: str) -> tuple[float | None, int]:
    """Median rows per second of earlier attempts of jobs named *name* that wrote rows."""
    import statistics  # only when the job names a sample count: 6 ms of every command otherwise

    rates = []
    for row in store.list_jobs(limit=500):
        if row.name != name:
            continue
        for attempt in store.attempts(row.id):
            if attempt.rows_done and attempt.started_at and attempt.ended_at and attempt.ended_at > attempt.started_at:
                rates.append(attempt.rows_done / (attempt.ended_at - attempt.started_at))
    return (statistics.median(rates) if rates else None), len(rates)


@hookimpl
def runjob_estimate(job, cluster, context):
    samples = _samples(job)
    if samples is None:
        return None
    given = job.params.get("throughput_per_s")
    rate, seen = (float(given), 0) if isinstance(given, (int, float)) and given > 0 else measured_throughput(context.store, job.name)
    if rate is None:
        return None
    from runjob_core.estimator import estimate_walltime

    requested = parse_duration(job.resources.time) if job.resources.time else None
    result = estimate_walltime(samples, rate, requested_seconds=requested)
    where = f"from {seen} earlier attempt{'s' if seen != 1 else ''} of {job.name!r}" if seen else "params.throughput_per_s"
    summary = f"about {result['walltime']} for {samples} rows at {rate:.3g} rows/s ({where})"
    suggestions: tuple[str, ...] = ()
    if result["exceeds_requested"]:
        summary += (f"; over the requested {format_slurm_time(requested)}: it needs {result['segments']} segments, "
                    "resumed from checkpoints" if job.resume.auto else "")
        if not job.resume.auto:
            suggestions = (f"ask for resources.time >= {result['walltime']}, or set resume.auto: true",)
    fits = False if result["exceeds_requested"] and not job.resume.auto else None
    return Estimate(source=SOURCE, summary=summary, fits=fits, suggestions=suggestions, data=result)
