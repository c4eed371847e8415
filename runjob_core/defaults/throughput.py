"""The core's time plugin: how long a job will run (pre-flight) and how fast it really ran (collect).

Pre-flight: a job with a model and GPUs gets the first-principles time model
(:mod:`runjob_core.estimator.time_preflight`), or the rate an earlier run with the same model
and settings achieved on this cluster. A job without a model keeps the older rule: its row
count at the throughput of earlier runs with the same name, or ``params.throughput_per_s``.
Either way the answer is an :class:`Estimate` whose ``data["time"]`` is the ``time`` object;
it warns when the job needs resume segments and refuses (``fits=False``) when it needs them
and cannot checkpoint and resume.

Collect: the rate the job printed becomes a ``throughput`` artifact
(:mod:`runjob_core.estimator.rates`), whatever the backend.
"""

from __future__ import annotations


from runjob_core.config import format_slurm_time, parse_duration
from runjob_core.errors import RunjobError
from runjob_core.models import Estimate

from runjob_core import hookimpl  # the one marker (runjob_core.__init__)
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


@hookimpl(trylast=True)  # after the memory estimate: the plan shows memory first, then time
def runjob_estimate(job, cluster, context):
    if (job.model.path or job.model.name) and job.resources.gpus > 0:
        from runjob_core.estimator import time_gate

        return time_gate.time_estimate(job, cluster, context, SOURCE)
    return _rows_estimate(job, context)


def _rows_estimate(job, context):
    """A job without a model: rows at the rate of earlier runs of the same name, or the one given."""
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


@hookimpl
def runjob_collect(job, submission, status, dest, context):
    """The rate the job achieved, as a ``throughput`` artifact keyed like the memory record."""
    if not ((job.model.path or job.model.name) and job.resources.gpus > 0):
        return None
    from runjob_core.estimator import rates

    cluster = context.clusters.get(submission.cluster)
    if cluster is None:
        return None
    try:
        log = context.transport_for(submission).read_text(submission.log_path) or ""
    except RunjobError:
        log = ""
    rows_per_s = None
    for attempt in context.store.attempts(submission.job_id):
        if attempt.n == submission.attempt and attempt.rows_done and attempt.started_at and attempt.ended_at:
            rows_per_s = attempt.rows_done / max(1e-9, attempt.ended_at - attempt.started_at)
    artifact = rates.throughput_artifact(job, cluster, submission, log, rows_per_s, SOURCE)
    return [artifact] if artifact is not None else None
