"""runjob's SLURM backend: jobs on a SLURM cluster reached over SSH.

The hook implementations are thin and import nothing heavy; the work is in
:mod:`runjob_slurm._backend` (submit, poll, cancel, collect), :mod:`runjob_slurm._parse`
(squeue/sacct output) and :mod:`runjob_slurm._diagnose` (why sbatch said no).
"""

from __future__ import annotations

from runjob_core import hookimpl

SOURCE = "runjob-slurm"


@hookimpl
def runjob_transport(cluster, context):
    from runjob_core import sshagent

    if sshagent.enabled():
        # runjob commands share one connection per cluster (see runjob_core.sshagent).
        return sshagent.AgentTransport(cluster)
    from runjob_core.ssh import SSHTransport

    return SSHTransport(cluster)


@hookimpl
def runjob_estimate(job, cluster, context):
    if cluster.type != "slurm":  # not routed: every plugin sees every job (sinfo on a pod, or on this machine)
        return None
    from runjob_slurm import _backend

    return _backend.check_partition_limits(job, cluster, context)


@hookimpl
def runjob_render(job, cluster, templates, context):
    from runjob_slurm import _render

    return _render.render(job, cluster, templates, context)


@hookimpl
def runjob_submit(job, rendered, cluster, context):
    from runjob_slurm import _backend

    return _backend.submit(job, rendered, cluster, context)


@hookimpl
def runjob_reattach(job, tag, cluster, context):
    from runjob_slurm import _backend

    return _backend.reattach(tag, cluster, context)


@hookimpl
def runjob_poll(submissions, cluster, context):
    from runjob_slurm import _backend

    return _backend.poll(submissions, cluster, context)


@hookimpl
def runjob_cancel(submissions, cluster, context):
    from runjob_slurm import _backend

    return _backend.cancel(submissions, cluster, context)


@hookimpl(tryfirst=True)
def runjob_collect(submission, status, dest, context):
    from runjob_slurm import _backend

    return _backend.collect(submission, dest, context)


@hookimpl
def runjob_check_cluster(cluster, transport, context):
    from runjob_slurm import _backend

    return _backend.check_cluster(cluster, transport)
