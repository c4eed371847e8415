"""runjob's local backend: jobs run on this machine, detached, one process group each.

The hook implementations are thin; the work is in :mod:`runjob_local._runner`.
"""

from __future__ import annotations

from runjob_core import hookimpl

NAME = "local"
SOURCE = "runjob-local"


@hookimpl
def runjob_submit(job, rendered, cluster, context):
    from runjob_local import _runner

    return _runner.submit(job, rendered, cluster, context)


@hookimpl
def runjob_reattach(job, tag, cluster, context):
    from runjob_local import _runner

    return _runner.reattach(tag, context)


@hookimpl
def runjob_poll(submissions, cluster, context):
    from runjob_local import _runner

    return _runner.poll(submissions)


@hookimpl
def runjob_cancel(submissions, cluster, context):
    from runjob_local import _runner

    return _runner.cancel(submissions)


@hookimpl(tryfirst=True)
def runjob_collect(submission, status, dest, context):
    from runjob_local import _runner

    return _runner.collect(submission, dest)
