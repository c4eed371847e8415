"""runjob's RunPod backend: each attempt runs on a GPU pod rented for it and returned after.

The hook implementations are thin and import lazily (``runjob --help`` loads no plugin
code); the work is in :mod:`runjob_runpod._backend`, the REST v2 client in
:mod:`runjob_runpod._api`, SSH to pods in :mod:`runjob_runpod._ssh`, the cluster keys'
schema in :mod:`runjob_runpod._settings`. Routing: only ``type: runpod`` clusters reach
these hooks, except :func:`runjob_estimate`, which the core calls on every plugin.
"""

from __future__ import annotations

from runjob_core import hookimpl

NAME = "runpod"
SOURCE = "runjob-runpod"


@hookimpl
def runjob_transport(cluster, context):
    from runjob_runpod import _backend
    from runjob_runpod._router import PodRouter

    return PodRouter(cluster, _backend.settings_for(cluster, context), context)


@hookimpl
def runjob_estimate(job, cluster, context):
    if cluster.type != NAME:  # this hook is not routed: every plugin sees every job
        return None
    from runjob_runpod import _backend

    return _backend.estimate(job, cluster, context)


@hookimpl
def runjob_submit(job, rendered, cluster, context):
    from runjob_runpod import _backend

    return _backend.submit(job, rendered, cluster, context)


@hookimpl
def runjob_reattach(job, tag, cluster, context):
    from runjob_runpod import _backend

    return _backend.reattach(job, tag, cluster, context)


@hookimpl
def runjob_poll(submissions, cluster, context):
    from runjob_runpod import _backend

    return _backend.poll(submissions, cluster, context)


@hookimpl
def runjob_cancel(submissions, cluster, context):
    from runjob_runpod import _backend

    return _backend.cancel(submissions, cluster, context)


@hookimpl(tryfirst=True)
def runjob_collect(submission, status, dest, context):
    from runjob_runpod import _backend

    return _backend.collect(submission, dest, context)


@hookimpl
def runjob_resume(submission, status, context):
    from runjob_runpod import _backend

    return _backend.resume(submission, status, context)


@hookimpl
def runjob_check_cluster(cluster, transport, context):
    from runjob_runpod import _backend

    return _backend.check_cluster(cluster, context)
