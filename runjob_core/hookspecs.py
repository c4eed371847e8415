"""Hook specifications: the contract between runjob and its plugins.

Every hook is called with keyword arguments. An implementation may accept any subset of
a hook's parameters, so new parameters can be added without breaking plugins. Parameters
have no defaults. Records returned by hooks are frozen attrs classes from
:mod:`runjob_core.models` and name the plugin that made them in ``source``.

Two kinds of call:

*every plugin*
    The hook is called on every registered plugin and all non-None answers are used.

*routed*
    The hook concerns one job on one cluster. The core calls it with every *other*
    backend removed, so only the job's backend answers, while plugins that are not
    backends (health checks, publishers, audit wrappers) still take part. A backend
    therefore never checks ``cluster.type`` itself. A plugin is a *backend* exactly when
    it implements :func:`runjob_submit`; its entry-point name is the backend name that
    ``type:`` in ``clusters.yaml`` refers to.

Expected failures (the scheduler said no, the host is unreachable, the token was
refused) are raised as :class:`runjob_core.errors.BackendError` or
:class:`runjob_core.errors.TransportError` with a message that says what to do; the CLI
prints it on one line. Any other exception is reported as a bug in the plugin, with its
traceback.

The ``context`` parameter is a :class:`runjob_core.context.RunContext`: the state store,
the state directory, the one process runner (:func:`runjob_core.execute.run`) and the
transports of this invocation. Plugins keep per-invocation state in
``context.scratchpad(plugin_name)``, never in module globals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from pathlib import Path

    import jinja2

    from runjob_core.context import RunContext
    from runjob_core.models import (
        Artifact,
        ClusterConfig,
        Estimate,
        Finding,
        JobSpec,
        JobStatus,
        Reference,
        Rendered,
        CheckResult,
        ResumePlan,
        Submission,
    )
    from runjob_core.transport import Transport

hookspec = pluggy.HookspecMarker("runjob")


@hookspec
def runjob_estimate(job: JobSpec, cluster: ClusterConfig, context: RunContext) -> Estimate | None:
    """Estimate what running *job* on *cluster* would take, before anything is queued.

    Called during pre-flight (``runjob plan``, ``runjob submit``, ``runjob run``), before
    rendering. Memory estimators, backends (queue wait, cost) and benchmark references
    (throughput) answer.

    :param job: The validated job specification.
    :param cluster: The cluster the job is meant for.
    :param context: This invocation's context.
    :returns: An :class:`Estimate` naming your plugin in ``source``, or ``None`` if you
        have nothing to say about *job*. ``fits=False`` makes ``submit`` refuse the job
        unless the user passes ``--force``; give ``suggestions`` that say what to change.

    Result: called on every plugin; all non-None estimates are used.

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def runjob_render(
    job: JobSpec, cluster: ClusterConfig, templates: jinja2.Environment, context: RunContext
) -> Rendered | None:
    """Render the job script of *job* for *cluster*.

    Called once per attempt before :func:`runjob_submit`, and by ``runjob render``.
    A backend adds its own lines (``#SBATCH`` directives, module loads) by rendering its
    own template, which extends the job's template (``base``, ``training`` or ``vllm``).

    :param templates: The Jinja2 environment (user templates, then plugin packages, then
        the core's). It uses ``StrictUndefined`` and provides the ``sh`` filter, which
        shell-quotes a value; every value that lands in a shell line must pass through it.
    :returns: A :class:`Rendered`, or ``None`` to let the core's default render the
        job's template as it is.

    Result: routed to the job's backend; the first non-None result wins. The core's
    default implementation runs last.

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def runjob_transport(cluster: ClusterConfig, context: RunContext) -> Transport | None:
    """Return the transport (run a command, move files, read logs) for *cluster*.

    Called at most once per cluster per invocation: the core caches the answer in the
    context, so one connection serves every job on that cluster. Open connections
    lazily, on first use, so ``runjob status`` of local jobs never dials a remote host.

    :returns: A :class:`runjob_core.transport.Transport`, or ``None`` for the core's
        local transport.
    :raises runjob_core.errors.TransportError: The cluster config cannot describe a
        reachable host (say which key to fix).

    Result: routed to the cluster's backend; the first non-None result wins.

    .. versionadded:: 0.1
    """


@hookspec
def runjob_check_cluster(cluster: ClusterConfig, transport: Transport, context: RunContext) -> Iterable[CheckResult] | None:
    """Check that *cluster* is usable (``runjob clusters check NAME``), after the core's own
    checks (connect, whoami, scratch writable, free disk) passed.

    A backend adds what only it knows: ``squeue -u $USER`` answers, the default partition
    exists, the API key is accepted. Each failed row says how to fix it.

    Result: routed to the cluster's backend (plus non-backend plugins); all rows shown.

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def runjob_submit(job: JobSpec, rendered: Rendered, cluster: ClusterConfig, context: RunContext) -> Submission | None:
    """Submit *rendered* to your backend and return a handle for later calls.

    Called once per attempt, after the store has recorded the attempt as ``SUBMITTING``
    with its tag (``context.current.tag``). The backend must attach the tag to the job
    (a SLURM ``--comment``, a pod label, a pid file name) so that
    :func:`runjob_reattach` can find the job if runjob dies before it records the result.

    :param job: The job being submitted.
    :param rendered: The script produced by :func:`runjob_render`.
    :param cluster: The job's cluster; its ``type`` is your backend name.
    :returns: A :class:`Submission` whose ``backend`` is your backend name. Put any
        JSON-safe data you need later in ``extra``; it is kept in the state store.
    :raises runjob_core.errors.BackendError: The backend refused the job; the message
        says why and what to change (for SLURM: the partition that does not exist and
        the ones that do). Nothing may be left half-submitted.

    Result: routed to the cluster's backend; the first non-None result wins.
    A plugin is a *backend* exactly when it implements this hook.

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def runjob_reattach(job: JobSpec, tag: str, cluster: ClusterConfig, context: RunContext) -> Submission | None:
    """Find a job submitted earlier with *tag* whose submission was never recorded.

    Called when the store holds an attempt stuck in ``SUBMITTING`` (runjob was killed
    between submitting and recording). Answering makes runjob attach to the running job
    instead of submitting it a second time.

    :returns: The :class:`Submission` of the job carrying *tag*, or ``None`` if your
        backend has no such job (the core then submits it).

    Result: routed to the cluster's backend; the first non-None result wins.

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def runjob_poll(
    submissions: Sequence[Submission], cluster: ClusterConfig, context: RunContext
) -> Mapping[str, JobStatus] | None:
    """Return the current status of every submission in *submissions*.

    Called once per monitoring cycle **per cluster**, with every active submission on
    that cluster: a backend must answer all of them with a constant number of remote
    calls (one ``squeue`` plus one ``sacct`` for the jobs that left the queue), never
    one call per job.

    :param submissions: The active submissions of *cluster* (may be empty).
    :returns: A mapping from ``submission.backend_job_id`` to :class:`JobStatus`. A job
        the backend cannot find anywhere is ``LOST``, never silently left out.

    Result: routed to the cluster's backend; the first non-None result wins.

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def runjob_cancel(submissions: Sequence[Submission], cluster: ClusterConfig, context: RunContext) -> Sequence[str] | None:
    """Cancel every submission in *submissions* (one call for many jobs).

    :returns: The backend job ids that were cancelled (or had already ended).
    :raises runjob_core.errors.BackendError: The backend refused to cancel.

    Result: routed to the cluster's backend; the first non-None result wins.

    .. versionadded:: 0.1
    """


@hookspec
def runjob_check_health(
    submission: Submission, status: JobStatus, window: str, context: RunContext
) -> Iterable[Finding] | None:
    """Look at what a running or finished job did since the last cycle.

    Called once per monitoring cycle for every job whose status or logs changed, and
    once more when the job ends. Checkers are *streaming*: *window* holds only the log
    text that arrived since the previous call for this submission, never the whole log
    again. Keep per-submission state in ``context.scratchpad(...)``.

    :param submission: The attempt being watched.
    :param status: Its status from this cycle's :func:`runjob_poll`.
    :param window: New log text (complete lines only) since the previous call.
    :returns: Findings, each with a stable ``label`` and an ``action`` (``stop``,
        ``resume``, ``retry``, ``warn``, ``continue``). An empty iterable or ``None`` means
        nothing to report.

    Result: called on every plugin (routed: only the job's own backend among backends);
    all findings are recorded as events and their actions applied.

    .. versionadded:: 0.1
    """


@hookspec
def runjob_collect(submission: Submission, status: JobStatus, dest: Path, context: RunContext) -> Iterable[Artifact] | None:
    """Collect what a finished job produced into *dest*, then publish and check it.

    Backends download (``tryfirst``); publishers, verifiers and validators run after
    them and see the downloaded files in *dest*.

    :param dest: The local results folder of the job (``./results/<job name>/``).
    :returns: :class:`Artifact` records. An artifact with ``kind="problem"`` and
        ``data["severity"] == "error"`` stops the chain from reporting success.

    Result: routed (the job's backend, plus every non-backend plugin); all answers used.

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def runjob_resume(submission: Submission, status: JobStatus, context: RunContext) -> ResumePlan | None:
    """Plan how to continue *submission* after it stopped early (time limit, preemption).

    :returns: A :class:`ResumePlan` naming the newest complete checkpoint and the
        environment the next attempt gets, or ``None`` when the job cannot resume.

    Result: routed to the job's backend, first non-None result; the core's default
    implementation (checkpoint folder on the cluster, via the transport) runs last.

    .. versionadded:: 0.1
    """


@hookspec
def runjob_references(context: RunContext) -> Iterable[Reference] | None:
    """Return benchmark references this plugin ships.

    Called during pre-flight to find the reference of ``job.benchmark`` by name or alias.

    Result: called on every plugin; all references are used (the user's own project
    references win over a plugin's with the same name).

    .. versionadded:: 0.1
    """
