"""runjob's RunPod backend: each attempt runs on a GPU pod rented for it and returned after.

The hook implementations are thin and import lazily (``runjob --help`` loads no plugin
code); renting a pod is in :mod:`runjob_runpod._pods`, the rest of the work in
:mod:`runjob_runpod._backend`, the REST v2 client in
:mod:`runjob_runpod._api`, SSH to pods in :mod:`runjob_runpod._ssh`, the cluster keys'
schema in :mod:`runjob_runpod._settings`.
"""

from __future__ import annotations

from runjob_core import hookimpl

NAME = "runpod"
SOURCE = "runjob-runpod"


@hookimpl
def runjob_backend_info():
    from runjob_core.models import BackendInfo
    from runjob_runpod._settings import RunpodSettings

    # A pod's API status is one list call for every job; still, no need to ask every second.
    return BackendInfo(name=NAME, source=SOURCE, options=RunpodSettings, machine_per_job=True,
                       poll_interval=5.0, max_poll_interval=30.0, scripts_by_substitution=True)


@hookimpl
def runjob_estimate(job, cluster, context):
    from runjob_runpod import _checks

    return _checks.estimate(job, cluster, context)


@hookimpl
def runjob_provision(job, attempt, cluster, context):
    from runjob_runpod import _pods

    return _pods.provision(job, attempt, cluster, context)


@hookimpl
def runjob_transport(cluster, machine, context):
    from runjob_runpod import _pods

    if machine is None:
        _pods.no_standing_host(cluster)
    return _pods.pod_transport(cluster, machine, context)


@hookimpl
def runjob_submit(job, attempt, rendered, cluster, transport, context):
    from runjob_runpod import _backend

    return _backend.submit(job, attempt, rendered, cluster, transport, context)


@hookimpl
def runjob_reattach(job, attempt, tag, cluster, context):
    from runjob_runpod import _backend

    return _backend.reattach(job, attempt, tag, cluster, context)


@hookimpl
def runjob_list_tagged(cluster, context):
    from runjob_runpod import _backend

    return _backend.list_tagged(cluster, context)


@hookimpl
def runjob_poll(submissions, cluster, context):
    from runjob_runpod import _backend

    return _backend.poll(submissions, cluster, context)


@hookimpl
def runjob_cancel(submissions, cluster, context):
    from runjob_runpod import _backend

    return _backend.cancel(submissions, cluster, context)


@hookimpl(tryfirst=True)
def runjob_collect(submission, status, dest, cluster, context):
    from runjob_runpod import _backend

    return _backend.collect(submission, status, dest, cluster, context)


@hookimpl
def runjob_resume(submission, status, cluster, context):
    from runjob_runpod import _backend

    return _backend.resume(submission, status, cluster, context)


@hookimpl
def runjob_release(machine, submission, cluster, reason, context):
    from runjob_runpod import _backend

    _backend.release(machine, submission, cluster, reason, context)


@hookimpl
def runjob_check_cluster(cluster, transport, context):
    from runjob_runpod import _checks

    return _checks.check_cluster(cluster, context)
