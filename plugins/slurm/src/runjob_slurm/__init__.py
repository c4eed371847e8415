"""runjob's SLURM backend: jobs on a SLURM cluster reached over SSH.

The hook implementations are thin and import nothing heavy; the work is in
:mod:`runjob_slurm._backend` (submit, poll, cancel, collect), :mod:`runjob_slurm._parse`
(squeue/sacct output) and :mod:`runjob_slurm._diagnose` (why sbatch said no).
"""

from __future__ import annotations

from runjob_core import hookimpl

SOURCE = "runjob-slurm"


@hookimpl
def runjob_backend_info():
    from runjob_core.models import BackendInfo

    from runjob_slurm._options import SlurmOptions

    # A login host over SSH; a scheduler is polled gently (30 s once nothing changes).
    # Its script names the job and its id only as text (sbatch-safe, quoted): an array's
    # elements are rendered once (BackendInfo.scripts_by_substitution).
    return BackendInfo(name="slurm", source=SOURCE, options=SlurmOptions, required_keys=("host",), poll_interval=5.0,
                       max_poll_interval=30.0, scripts_by_substitution=True)


@hookimpl
def runjob_transport(cluster, context):
    from runjob_core.transport import agent as sshagent

    if sshagent.enabled():
        # runjob commands share one connection per cluster (see runjob_core.transport.agent).
        return sshagent.AgentTransport(cluster)
    from runjob_core.transport.ssh import SSHTransport

    return SSHTransport(cluster)


@hookimpl
def runjob_estimate(job, cluster, context):
    from runjob_slurm import _backend, _render

    return _backend.check_partition_limits(job, cluster, context) or _render.margin_note(job)


@hookimpl
def runjob_render(job, attempt, cluster, templates, context):
    from runjob_slurm import _render

    return _render.render(job, attempt, cluster, templates, context)


@hookimpl
def runjob_submit(job, attempt, rendered, cluster, transport):
    from runjob_slurm import _backend

    return _backend.submit(job, attempt, rendered, cluster, transport)


@hookimpl
def runjob_submit_array(jobs, attempts, rendereds, name, cluster, transport, max_parallel, folders, common_files,
                        script_model):
    from runjob_slurm import _array

    return _array.submit(jobs, attempts, rendereds, name, cluster, transport, max_parallel, folders, common_files,
                         script_model)


@hookimpl
def runjob_reattach(attempt, cluster, context):
    from runjob_slurm import _backend

    return _backend.reattach(attempt, cluster, context)


@hookimpl
def runjob_list_tagged(cluster, context):
    from runjob_slurm import _backend

    return _backend.list_tagged(cluster, context)


@hookimpl
def runjob_poll(submissions, cluster, context):
    from runjob_slurm import _backend

    return _backend.poll(submissions, cluster, context)


@hookimpl
def runjob_cancel(submissions, cluster, context):
    from runjob_slurm import _backend

    return _backend.cancel(submissions, cluster, context)


@hookimpl(tryfirst=True)
def runjob_collect(job, submission, status, dest, context):
    from runjob_slurm import _backend

    return _backend.collect(submission, dest, context, job=job)


@hookimpl
def runjob_check_cluster(cluster, transport, context):
    from runjob_slurm import _backend

    return _backend.check_cluster(cluster, transport)
