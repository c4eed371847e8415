"""The machine side of a recorded attempt: the cluster it ran on, and giving a provisioned
machine back (``runjob_release``) once its files are home. Used by submit, resubmit, cancel
and collect alike (:mod:`runjob_core.lifecycle`, :mod:`runjob_core.lifecycle.collect_phase`)."""

from __future__ import annotations

import time

from runjob_core import _plugin_errors, plugins
from runjob_core.context import RunContext
from runjob_core.errors import RunjobError
from runjob_core.models import ClusterConfig, Machine, Submission
from runjob_core.store import AttemptRow, JobRow
from runjob_core.transport import harvested


def job_cluster(context: RunContext, row: JobRow) -> ClusterConfig:
    """The cluster a recorded job ran on (it may have left clusters.yaml since)."""
    cluster = context.clusters.get(row.cluster)
    if cluster is None:
        message = f"job {row.id} ran on cluster {row.cluster!r}, which is no longer in clusters.yaml; put it back to reach the job"
        raise RunjobError(message)
    return cluster


def release(context: RunContext, job_id: str, n: int, machine: Machine, submission: Submission | None,
            cluster: ClusterConfig, *, reason: str) -> None:
    """Give a provisioned machine back (``runjob_release``), once; a failure is recorded."""
    caller = context.hook("runjob_release", cluster.type)
    kwargs = {"machine": machine, "submission": submission, "cluster": cluster, "reason": reason, "context": context}
    try:
        plugins.call_each(caller, kwargs, blame=cluster.type,
                          on_error=_plugin_errors.raiser(context, "runjob_release", job_id=job_id, attempt=n))
    except RunjobError as exc:
        context.event(job_id, "release_failed", f"could not release machine {machine.id} ({exc}); it may still cost money: "
                      f"runjob cancel {job_id}, or remove it in the provider's console", attempt=n)
        return
    context.store.update_attempt(job_id, n, released_at=time.time())
    context.event(job_id, "released", f"attempt {n}: machine {machine.id} released ({reason})", attempt=n, machine=machine.id)


def release_attempt(context: RunContext, row: JobRow, attempt: AttemptRow, *, reason: str) -> None:
    """Release the machine of a recorded attempt if it has one and it is not released yet,
    and its files are home: a submitted attempt's machine goes back only through
    :mod:`runjob_core.collecting.harvest`, which copies them first (and retries a failed copy)."""
    machine = attempt.machine
    if machine is None or attempt.released_at is not None:
        return
    submission = attempt.submission
    if submission is not None and not harvested.is_harvested(context.state_dir, submission.tag):
        return
    release(context, row.id, attempt.n, machine, attempt.submission, job_cluster(context, row), reason=reason)
