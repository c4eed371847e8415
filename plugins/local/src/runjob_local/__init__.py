"""runjob's local backend: jobs run on this machine, detached, one process group each.

The hook implementations are thin; the work is in :mod:`runjob_local._runner`.
"""

from __future__ import annotations

from runjob_core import hookimpl

NAME = "local"
SOURCE = "runjob-local"


@hookimpl
def runjob_backend_info():
    from runjob_core.models import BackendInfo

    from runjob_local._checks import LocalSettings

    # Polling a local job is a few stat() calls: back off only to 5 s.
    return BackendInfo(name=NAME, source=SOURCE, options=LocalSettings, poll_interval=0.5, max_poll_interval=5.0,
                       scripts_by_substitution=True)


@hookimpl
def runjob_estimate(job, cluster, context):
    from runjob_local import _checks

    return _checks.estimate(job, cluster, context)


@hookimpl
def runjob_check_cluster(cluster, transport, context):
    from runjob_local import _checks

    return _checks.check_gpus(cluster, context)


@hookimpl
def runjob_submit(job, attempt, rendered, cluster, context):
    from runjob_local import _runner

    return _runner.submit(job, attempt, rendered, cluster, context)


@hookimpl
def runjob_reattach(attempt, cluster, context):
    from runjob_local import _runner

    return _runner.reattach(attempt, cluster.name, context)


@hookimpl
def runjob_list_tagged(cluster, context):
    from runjob_local import _listing

    return _listing.list_tagged(cluster, context)


@hookimpl
def runjob_poll(submissions, cluster, context):
    from runjob_local import _runner

    return _runner.poll(submissions, cluster, context)


@hookimpl
def runjob_cancel(submissions, cluster, context):
    from runjob_local import _runner

    return _runner.cancel(submissions, context)


@hookimpl(tryfirst=True)
def runjob_collect(job, submission, status, dest, context):
    from runjob_local import _checks, _runner

    # The peak the log reports (a torch print), else the one the GPU telemetry saw.
    memory = _runner.measured_memory(submission, context, job) or _checks.telemetry_memory(job, submission, context)
    return _runner.collect(submission, dest) + ([memory] if memory else [])
