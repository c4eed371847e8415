"""Hook specifications: the contract between runjob and its plugins.

Every hook is called with keyword arguments. An implementation may accept any subset of
a hook's parameters, so new parameters can be added without breaking plugins. Parameters
have no defaults. Records passed to and returned by hooks are frozen attrs classes from
:mod:`runjob_core.models`; the ones a hook returns name the plugin that made them in
``source``. Everything a hook needs arrives as a parameter: there is no "current job"
hidden in the context.

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

The life of one attempt, in call order (routed hooks to the job's backend)::

    runjob_estimate      pre-flight (with runjob_references), nothing exists yet
    runjob_provision     a backend that rents a machine per attempt creates it (else None)
    runjob_transport     the transport to that machine (or to the cluster's standing host)
    runjob_render        the job script
    (the core stages the script, params and job-side library through the transport)
    runjob_submit        start it; the attempt's tag goes with it
    runjob_poll          every cycle, batched per cluster
    runjob_check_health  every cycle the job changed, with the new log text and progress
    runjob_resume        after a time limit, preemption or a resumable loss
    (a machine of runjob_provision: the core copies the attempt's log, progress,
    metrics and results home through its transport as soon as a poll says it ended)
    runjob_release       the machine of runjob_provision is given back, right then
    runjob_collect       download, then publish and validate
    runjob_read_results  a harness's own files as one table (collect's checks, the report)
    runjob_collected     once the collect is recorded: the report, the dashboard, notices

And later, on any member's host: ``runjob_fetch_results`` when the report finds a job's
results neither here nor where they were collected (a publisher's copy brought back).

Expected failures (the scheduler said no, the host is unreachable, the token was
refused) are raised as :class:`runjob_core.errors.BackendError` or
:class:`runjob_core.errors.TransportError` with a message that says what to do; the CLI
prints it on one line. Any other exception raised by a plugin is a bug in that plugin,
handled the same way in every hook (:mod:`runjob_core._plugin_errors`): the traceback goes
to a file under ``.runjob/errors/``, the terminal gets one line per plugin and hook per
command naming that file, each job one ``plugin_error`` event per cycle (the report lists
them as anomalies), and the core carries on where it can: a failing health checker never
stops monitoring or collecting (``runjob health scan`` then says "checks incomplete"); where
the hook's answer is needed (submit, cancel, reattach, provision, resume) the command stops
with that line; a backend whose poll fails 5 cycles running gets its jobs marked with what
to do (``runjob forget`` clears them) and only its own jobs wait.

The ``context`` parameter is a :class:`runjob_core.context.RunContext`: the state store,
the state directory, the one process runner (``context.run``), the clusters and the
transports of this invocation (``context.transport(cluster, machine)``,
``context.transport_for(submission)``). Plugins keep per-invocation state in
``context.scratchpad(plugin_name)``, never in module globals.

A backend's first step is :func:`runjob_backend_info`; the plugin authors' guide
(``docs/plugin-authors.md``) walks through a whole backend, and
:class:`runjob_core.testing.BackendContract` checks one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from pathlib import Path
    from typing import Any

    import jinja2

    from runjob_core.context import RunContext
    from runjob_core.models import (
        Artifact,
        Attempt,
        BackendInfo,
        CheckResult,
        ClusterConfig,
        Estimate,
        Finding,
        JobSpec,
        JobStatus,
        Machine,
        Reference,
        Rendered,
        ResultsTable,
        ResumePlan,
        ScriptModel,
        Submission,
        TaggedJob,
    )
    from runjob_core.transport import Transport

hookspec = pluggy.HookspecMarker("runjob")


@hookspec
def runjob_backend_info() -> BackendInfo | None:
    """Describe your backend: its cluster keys, whether it creates machines, its cadence.

    Called when the core first needs to know (loading ``clusters.yaml``, checking a
    cluster, choosing the poll interval). It takes no parameters: a declaration, the same
    every time.

    :returns: A :class:`BackendInfo` whose ``name`` is your backend name (your entry-point
        name), or ``None`` if your plugin is not a backend. ``options`` is an attrs class
        of the keys your clusters take beside the core's (``api_url``, ``gpu_types``...),
        validated with the same file/key-path/did-you-mean errors as the core's keys and
        handed to every hook as ``cluster.options``. Declare each key's help and choices
        with :func:`runjob_core.config.options.option`; subclass
        :class:`~runjob_core.config.options.ClusterOptions` for rules across keys
        (``problems``, run when ``clusters.yaml`` is loaded) and for the rows that show
        your clusters in ``runjob clusters`` and the review (``describe``).

    Result: called on every plugin; each backend's answer is kept by its ``name``.

    .. versionadded:: 0.2
    .. versionchanged:: 0.3 the options class may declare help and choices, ``problems`` and ``describe``.
    """


@hookspec
def runjob_estimate(job: JobSpec, cluster: ClusterConfig, context: RunContext) -> Estimate | None:
    """Estimate what running *job* on *cluster* would take, before anything is queued.

    Called during pre-flight (``runjob plan``, ``runjob submit``, ``runjob run`` and
    :class:`runjob_core.api.Session`), before rendering. Memory estimators, backends (queue
    wait, cost, partition limits) and benchmark references (throughput) answer.

    :param job: The validated job specification.
    :param cluster: The cluster the job is meant for; its ``type`` is the backend.
    :param context: This invocation's context.
    :returns: An :class:`Estimate` naming your plugin in ``source``, or ``None`` if you
        have nothing to say about *job*. ``fits=False`` makes pre-flight refuse the job
        unless the user passes ``--force``; give ``suggestions`` that say what to change.
        Keys of ``data`` the core reads after every plugin answered: ``warnings`` (a list
        of strings pre-flight shows without refusing), ``usd_per_hour`` (``{GPU type:
        dollars per hour for the job's GPUs}``: the core prices the time estimate's
        GPU-hours with the dearest) and ``partition_max_seconds`` (the limit a job without
        ``resources.time`` runs under: the core counts resume segments against it),
        ``usd_max_total`` (what one attempt may cost at most, in USD) and
        ``usd_budget_total`` (a budget the cluster's jobs of one sweep share: the sweep
        starts an element only while the elements' costs so far plus the ``usd_max_total``
        of each active one stay within it). The core's own time estimate puts its ``time``
        object there.

    Result: routed to the cluster's backend (plus every non-backend plugin); all non-None
    estimates are used.

    .. versionadded:: 0.1
    .. versionchanged:: 0.2 routed: another backend's estimate no longer runs for the job.
    .. versionchanged:: 0.3 ``data`` keys ``warnings``, ``usd_per_hour``, ``partition_max_seconds``.
    .. versionchanged:: 0.3 ``data`` keys ``usd_max_total``, ``usd_budget_total`` (a sweep's shared budget).
    """


@hookspec(firstresult=True)
def runjob_provision(job: JobSpec, attempt: Attempt, cluster: ClusterConfig, context: RunContext) -> Machine | None:
    """Create the machine *attempt* will run on, when your backend rents one per job.

    Called once per attempt, after the attempt is recorded as ``SUBMITTING`` and before
    anything is staged. Wait until the machine is reachable (show progress through
    ``context.event``), and name it with ``attempt.tag`` so that :func:`runjob_reattach`
    finds it if runjob dies meanwhile. If anything after this fails, the core calls
    :func:`runjob_release` with the machine.

    :param job: The job being submitted.
    :param attempt: The attempt (id, number, tag, layout, resume point).
    :param cluster: The job's cluster.
    :param context: This invocation's context.
    :returns: A :class:`Machine`, or ``None`` for a backend with a standing host (SLURM,
        local: the default).
    :raises runjob_core.errors.BackendError: No machine could be had (no capacity in any
        GPU type, budget exceeded, key refused); nothing may be left running.

    Result: routed to the cluster's backend; the first non-None result wins.

    .. versionadded:: 0.2
    """


@hookspec(firstresult=True)
def runjob_transport(cluster: ClusterConfig, machine: Machine | None, context: RunContext) -> Transport | None:
    """Return the transport (run a command, move files, read logs) for *cluster*.

    Called at most once per cluster and machine per invocation: the core caches the answer
    in the context, so one connection serves every job on a standing cluster. Open
    connections lazily, on first use, so ``runjob status`` of local jobs never dials a
    remote host.

    :param cluster: The cluster.
    :param machine: The machine :func:`runjob_provision` created for an attempt (the
        transport must reach it), or ``None`` for the cluster's standing host.
    :param context: This invocation's context.
    :returns: A :class:`runjob_core.transport.Transport`, or ``None`` for the core's
        local transport.
    :raises runjob_core.errors.TransportError: The cluster config cannot describe a
        reachable host (say which key to fix).

    Result: routed to the cluster's backend; the first non-None result wins.

    .. versionadded:: 0.1
    .. versionchanged:: 0.2 the *machine* parameter.
    """


@hookspec
def runjob_check_cluster(cluster: ClusterConfig, transport: Transport | None, context: RunContext) -> Iterable[CheckResult] | None:
    """Check that *cluster* is usable (``runjob clusters check NAME``).

    A backend adds what only it knows: ``squeue -u $USER`` answers, the default partition
    exists, the API key is accepted, the GPU types are in the catalog. Each failed row says
    how to fix it. A check must not start a job or rent a machine.

    :param cluster: The cluster to check.
    :param transport: The transport to its standing host, after the core's own checks
        (connect, whoami, scratch writable, free disk) passed; ``None`` for a backend whose
        :class:`BackendInfo` says ``machine_per_job`` (there is no host to check, and your
        rows replace the core's).
    :param context: This invocation's context.
    :returns: :class:`CheckResult` rows.

    Result: routed to the cluster's backend (plus non-backend plugins); all rows shown.

    .. versionadded:: 0.1
    .. versionchanged:: 0.2 *transport* is ``None`` for machine-per-job backends.
    """


@hookspec(firstresult=True)
def runjob_render(
    job: JobSpec, attempt: Attempt, cluster: ClusterConfig, templates: jinja2.Environment, context: RunContext
) -> Rendered | None:
    """Render the job script of *attempt* of *job* for *cluster*.

    Called once per attempt before :func:`runjob_submit`, and by ``runjob render`` /
    ``runjob plan`` (with a placeholder attempt ``rj-preview``). A backend adds its own
    lines (``#SBATCH`` directives, module loads) by rendering its own template, which
    extends the job's template (``base``, ``training`` or ``vllm``).

    :param job: The job specification.
    :param attempt: The attempt: ``attempt.template_vars()`` are the templates' ``runjob``
        variables (paths of the layout, tag, resume point, canary limit).
    :param cluster: The job's cluster.
    :param templates: The Jinja2 environment (user templates, then plugin packages, then
        the core's). It uses ``StrictUndefined`` and provides the ``sh`` filter, which
        shell-quotes a value; every value that lands in a shell line must pass through it.
    :param context: This invocation's context.
    :returns: A :class:`Rendered`, or ``None`` to let the core's default render the
        job's template as it is.

    Result: routed to the job's backend; the first non-None result wins. The core's
    default implementation runs last.

    .. versionadded:: 0.1
    .. versionchanged:: 0.2 the *attempt* parameter (was ``context.current``).
    """


@hookspec(firstresult=True)
def runjob_submit(
    job: JobSpec, attempt: Attempt, rendered: Rendered, cluster: ClusterConfig, transport: Transport, context: RunContext
) -> Submission | None:
    """Submit *rendered* to your backend and return a handle for later calls.

    Called once per attempt, after the store has recorded the attempt as ``SUBMITTING``
    with its tag and after the core staged the script, ``params.json`` and the job-side
    library into ``attempt.layout.job_dir`` through *transport*. The backend must attach
    ``attempt.tag`` to the job (a SLURM ``--comment``, a pod name, a pid file name) so that
    :func:`runjob_reattach` can find the job if runjob dies before it records the result.

    :param job: The job being submitted.
    :param attempt: The attempt; ``attempt.submission(...)`` builds the returned record
        with every path (and the machine) filled in.
    :param rendered: The script produced by :func:`runjob_render`; it is at
        ``attempt.layout.job_dir + "/" + rendered.script_name``.
    :param cluster: The job's cluster; its ``type`` is your backend name.
    :param transport: The transport to the machine the attempt runs on.
    :param context: This invocation's context.
    :returns: A :class:`Submission` whose ``backend`` is your backend name. Put any
        JSON-safe data you need later in ``extra``; it is kept in the state store.
    :raises runjob_core.errors.BackendError: The backend refused the job; the message
        says why and what to change (for SLURM: the partition that does not exist and
        the ones that do). Nothing may be left half-submitted.

    Result: routed to the cluster's backend; the first non-None result wins.
    A plugin is a *backend* exactly when it implements this hook.

    .. versionadded:: 0.1
    .. versionchanged:: 0.2 the *attempt* and *transport* parameters.
    """


@hookspec(firstresult=True)
def runjob_submit_array(
    jobs: list[JobSpec], attempts: list[Attempt], rendereds: list[Rendered], name: str, cluster: ClusterConfig,
    transport: Transport, max_parallel: int, context: RunContext,
    folders: list[dict[str, tuple[str, int]]] | None, common_files: dict[str, tuple[str, int]] | None,
    script_model: ScriptModel | None,
) -> list[Submission] | None:
    """Submit many jobs of one resource shape at once (the elements of a sweep, issue 26):
    one scheduler request for all of them, e.g. one SLURM job array.

    Optional. A backend that does not implement it (or returns None) gets one
    :func:`runjob_submit` call per job, as for any job; nothing else changes. Single jobs
    never come here, and every later call about one of these jobs (poll, cancel, health,
    collect, resume, reattach) is the ordinary per-job call with that job's own submission:
    a resumed or resubmitted element goes out alone through :func:`runjob_submit`.

    Called with two or more jobs whose resources, model and template are the same (their
    params differ), after the store recorded each attempt as ``SUBMITTING`` with its own tag.
    The lists are parallel: ``jobs[i]``, ``attempts[i]`` and ``rendereds[i]`` are one job.

    Where each job's files come from depends on whether the implementation names the
    *folders* parameter. One that does not finds each job's script, ``params.json`` and
    library staged by the core into its own ``attempts[i].layout.job_dir``, exactly as for
    :func:`runjob_submit`. One that does gets them instead, and puts them in place itself,
    either now or when the job's task starts but before its script runs (SLURM packs them
    into one bundle that each array task unpacks into its own folder: 1,000 folders are not
    written at submit). A job's synced workdir (``work/``) is put in place by the core in both
    cases. If it then returns None, the core stages the folders and submits them one by one.

    The backend must make each job findable by :func:`runjob_reattach` with its attempt
    alone (runjob may die after the scheduler took the batch and before the submissions
    were recorded): e.g. write a marker at a path its attempt names (SLURM: under
    ``attempts[i].layout.scratch``) naming the batch's own tag and the job's index in it,
    before submitting.

    :param jobs: The jobs, in the order their tasks get (task ``i`` runs ``jobs[i]``).
    :param attempts: Their attempts (``attempts[i].submission(...)`` builds each record).
    :param rendereds: Their rendered scripts, each already at its own job folder.
    :param name: The batch's name (the sweep's ``name:``; letters, digits, ``.``, ``_``, ``-``),
        e.g. for the scheduler's job name.
    :param cluster: Their cluster; its ``type`` is your backend name.
    :param transport: The transport to the cluster.
    :param max_parallel: At most this many of the jobs may run at once (SLURM: ``%K``).
    :param context: This invocation's context.
    :param folders: Each job's own files (``folders[i]`` for ``jobs[i]``): path relative to its
        job folder -> (text, mode). None when the core staged them (see above).
    :param common_files: Files every job's folder gets as well (the job-side library under
        ``lib/``), in the same form; None when the core staged them.
    :param script_model: For an implementation that names it and *folders*: when not None,
        every job's script is ``script_model.script_for(jobs[i].name, attempts[i].job_id)``
        (the same text as ``rendereds[i].script``, made from one render: see
        ``BackendInfo.scripts_by_substitution``) and *folders* leave the scripts out; the
        backend puts each at ``rendereds[i].script_name`` in its job folder (mode 0755) before
        it runs, e.g. by the same replacement on the host (SLURM ships the text once, where it
        shipped 1,000 scripts). An implementation that does not name it gets the scripts in
        *folders* as before.
    :returns: One :class:`Submission` per job, in the order of *jobs*, each with its own
        ``backend_job_id`` (SLURM: ``ARRAYID_TASK``); or None to let the core submit them
        one by one.
    :raises runjob_core.errors.BackendError: The backend refused the batch; nothing of it
        may be left submitted. The core then records every job of the batch as rejected.

    Result: routed to the cluster's backend; the first non-None result wins.

    .. versionadded:: 0.3
    .. versionchanged:: 0.3 the *folders* and *common_files* parameters.
    .. versionchanged:: 0.3 the *script_model* parameter.
    """


@hookspec(firstresult=True)
def runjob_reattach(job: JobSpec, attempt: Attempt, tag: str, cluster: ClusterConfig, context: RunContext) -> Submission | None:
    """Find a job submitted earlier with *tag* whose submission was never recorded.

    Called when the store holds an attempt stuck in ``SUBMITTING`` (runjob was killed
    between submitting and recording). Answering makes runjob attach to the running job
    instead of submitting it a second time. If your backend cannot tell right now (the
    scheduler does not answer), raise :class:`runjob_core.errors.TransportError`: the
    core then retries later instead of submitting a second copy.

    :param job: The job.
    :param attempt: The attempt being reattached (``attempt.machine`` is the machine
        provisioned for it, if the core recorded one before it died).
    :param tag: The tag to look for (``attempt.tag``).
    :param cluster: The job's cluster.
    :param context: This invocation's context.
    :returns: The :class:`Submission` of the job carrying *tag*, or ``None`` if your
        backend has no such job (the core then submits it).

    Result: routed to the cluster's backend; the first non-None result wins.

    .. versionadded:: 0.1
    .. versionchanged:: 0.2 the *attempt* parameter.
    """


@hookspec(firstresult=True)
def runjob_poll(
    submissions: Sequence[Submission], cluster: ClusterConfig, context: RunContext
) -> Mapping[str, JobStatus] | None:
    """Return the current status of every submission in *submissions*.

    Called once per monitoring cycle **per cluster**, with every active submission on
    that cluster: a backend must answer all of them with a constant number of remote
    calls (one ``squeue`` plus one ``sacct`` for the jobs that left the queue; one API
    list call), never one scheduler call per job.

    :param submissions: The active submissions of *cluster* (may be empty).
    :param cluster: The cluster.
    :param context: This invocation's context.
    :returns: A mapping from ``submission.backend_job_id`` to :class:`JobStatus`. A job
        the backend cannot find anywhere is ``LOST``, never silently left out; set
        ``resumable=True`` on a ``LOST`` status when the work can continue on a new
        machine (a reclaimed spot pod).

    Result: routed to the cluster's backend; the first non-None result wins.

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def runjob_cancel(submissions: Sequence[Submission], cluster: ClusterConfig, context: RunContext) -> Sequence[str] | None:
    """Cancel every submission in *submissions* (one call for many jobs).

    Your answer only says the cancel was *asked*: the core records each attempt
    ``CANCELLING`` and keeps calling :func:`runjob_poll` until it reports the job ended, so
    report ``CANCELLED`` there only once the job (process, pod, scheduler job) has really
    stopped, and keep a job's own ending (``COMPLETED``, ``FAILED``) if it ended before the
    cancel arrived. A cancel no poll confirms within the bound (60 s by default) is reported
    to the user with your poll's ``reason``.

    :param submissions: The active submissions to cancel, all on *cluster* (an attempt
        already ``CANCELLING`` may be asked again).
    :param cluster: The cluster.
    :param context: This invocation's context.
    :returns: The backend job ids whose cancel was asked (or that had already ended).
    :raises runjob_core.errors.BackendError: The backend refused to cancel.

    Result: routed to the cluster's backend; the first non-None result wins. The core
    copies the attempt's files home and calls :func:`runjob_release` for its machine once
    the poll says the attempt ended.

    .. versionchanged:: 0.3 confirmed by :func:`runjob_poll` (``CANCELLING``), no longer
       recorded ``CANCELLED`` from the answer.

    .. versionadded:: 0.1
    """


@hookspec
def runjob_check_health(
    job: JobSpec, submission: Submission, status: JobStatus, window: str, progress: Mapping[str, Any] | None,
    cluster: ClusterConfig | None, context: RunContext,
) -> Iterable[Finding] | None:
    """Look at what a running or finished job did since the last cycle.

    Called once per monitoring cycle for every job whose status or logs changed, and
    once more when the job ends; ``runjob health scan FILE`` calls it too, with the file's
    text as windows and a ``scan`` submission (``submission.backend == "scan"``).
    Checkers are *streaming*: *window* holds only the log text that arrived since the
    previous call for this submission, never the whole log again. Keep per-submission
    state in ``context.scratchpad(...)`` keyed by ``submission.tag``.

    :param job: The job's specification (its ``health`` policy, ``model.max_tokens``,
        ``checkpoint.every``).
    :param submission: The attempt being watched.
    :param status: Its status from this cycle's :func:`runjob_poll`.
    :param window: New log text (complete lines only) since the previous call.
    :param progress: The job's progress file as the job last wrote it (``step``,
        ``rows_done``, ``total``, ``updated_at``, ``metrics``), or ``None`` when it has
        written none.
    :param cluster: The cluster the job runs on (its ``clusters.yaml`` entry), or ``None``
        for ``runjob health scan FILE`` (a file, no cluster).
    :param context: This invocation's context.
    :returns: Findings, each with a stable ``label`` and an ``action`` (``stop``,
        ``resume``, ``retry``, ``warn``, ``continue``). An empty iterable or ``None`` means
        nothing to report.

    Result: called on every plugin (routed: only the job's own backend among backends);
    all findings are recorded as events and their actions applied.

    .. versionadded:: 0.1
    .. versionchanged:: 0.2 the *job* and *progress* parameters.
    .. versionchanged:: 0.3 the *cluster* parameter.
    """


@hookspec
def runjob_scan_log(job: JobSpec, path: Path, context: RunContext) -> Iterable[Finding] | None:
    """Scan a whole log file at once, offline (``runjob health scan FILE``).

    Optional, for checkers with a faster whole-file path (a memory-mapped multi-pattern
    pass) than being fed the file as text windows. A checker that answers here is not
    also fed the file through :func:`runjob_check_health`; the others are, as before. The
    findings must be those :func:`runjob_check_health` would give for the same text.

    :param job: A stand-in job specification carrying what the scan was given
        (``model.max_tokens`` for the truncation check).
    :param path: The log file.
    :param context: This invocation's context (an offline one: no job, no cluster).
    :returns: Findings, or ``None`` to be fed the file through :func:`runjob_check_health`.

    Result: called on every plugin; all findings are shown.

    .. versionadded:: 0.2
    """


@hookspec
def runjob_collect(
    job: JobSpec, submission: Submission, status: JobStatus, dest: Path, cluster: ClusterConfig, context: RunContext,
) -> Iterable[Artifact] | None:
    """Collect what a finished job produced into *dest*, then publish and check it.

    Backends download (``tryfirst``); publishers, verifiers and validators (the
    ``runjob-hub`` plugin) run after them and see the downloaded files in *dest*.

    :param job: The job's specification (``upload.repo``, ``columns``, ``model``).
    :param submission: The attempt whose results are collected (the latest one).
    :param status: Its final status as recorded; an *active* state (``RUNNING``,
        ``PENDING``, ...) means a peek at a job still running (``runjob collect`` before
        its end): copy what is there, keep the machine (do not mark anything final), and
        publish nothing. The core records no artifact of a peek and releases nothing.
    :param dest: The local results folder of the job (``./results/<job name>/``). Write
        nothing outside it. It may already hold an earlier copy: bring what is missing or
        changed (collect can always run again; the core removes local files that no longer
        match what the last collect brought before asking).
    :param cluster: The cluster the job ran on (its ``clusters.yaml`` entry).
    :param context: This invocation's context.
    :returns: :class:`Artifact` records. An artifact with ``kind="problem"`` and
        ``data["severity"] == "error"`` stops the chain from reporting success. A
        ``results`` artifact lists the files it brought in ``data["files"]`` (relative
        to *dest*): the core keeps them in the folder's manifest, the job's own record.

    Result: routed (the job's backend, plus every non-backend plugin); all answers used.
    An attempt with a machine of its own was released before (its files copied home):
    read its results through ``context.transport_for(submission)``, which serves that copy.

    .. versionadded:: 0.1
    .. versionchanged:: 0.2 the *job* parameter.
    .. versionchanged:: 0.3 called for a peek with the running attempt's status.
    .. versionchanged:: 0.3 the *cluster* parameter.
    """


@hookspec(firstresult=True)
def runjob_read_results(folder: Path, job: JobSpec | None) -> ResultsTable | None:
    """Read a job's results folder written in a harness's own layout as one table.

    A results reader recognises the files an evaluation harness writes (lm-evaluation-
    harness's ``results_*.json`` and ``samples_<task>_*.jsonl``) and turns them into
    per-sample rows (a key, the target, the response, one column per metric and
    ``score``) plus the harness's aggregate scores per task. Validation, the report and
    publishing then all read the same rows; without an answer they read the folder's
    JSONL files as they are. A reader only reads: it writes nothing, and answers
    ``None`` for a folder it does not recognise.

    :param folder: The job's local results folder (``./results/<job name>/``), as
        collected; possibly partial (collect may peek at a running attempt).
    :param job: The job's specification, or ``None`` when a folder is read without one
        (``runjob publish FOLDER``).
    :returns: A :class:`ResultsTable`, or ``None`` when this reader does not recognise
        the folder.

    Result: called on every plugin, first non-None answer wins; the core's built-in
    lm-evaluation-harness reader (:mod:`runjob_core.readers.lm_eval`) runs last.

    .. versionadded:: 0.3
    """


@hookspec(firstresult=True)
def runjob_fetch_results(job: JobSpec, artifacts: Sequence[Artifact], dest: Path) -> Path | None:
    """Bring back a copy of a job's results that a plugin published, for a host that cannot
    reach the folder they were collected into.

    On a state shared by a team, results are collected on the host that collects
    (``results/<name>/`` there); the ``collected`` event says where. When ``runjob report`` on
    another member's host can reach neither its own folder nor that one, it asks here: a
    publisher that put the results somewhere this host can read them (the Hub) copies them into
    *dest*, and the report reads them from there like a collected folder (results readers
    included) and says where they came from.

    :param job: The job's specification.
    :param artifacts: The job's recorded artifacts, oldest first (an implementation looks for
        its own: the Hub plugin for its ``ARTIFACT_HUB`` ones, whose ``data`` holds the commit
        and files it published).
    :param dest: An empty or earlier-fetched folder of this host's own, for this job only
        (``.runjob/fetched/<job id>/``). Write nothing outside it. It may hold what an earlier
        call brought: an implementation that finds the same copy there answers without fetching.
    :returns: The folder the results are in now (*dest* or a folder inside it), or ``None``
        when this plugin published nothing of this job.
    :raises runjob_core.errors.RunjobError: The copy exists and cannot be read now (the
        service is unreachable, the token is refused); the report shows the line and goes on.

    Result: called on every plugin, the first non-None answer wins. Not called by the
    dashboard (a build would fetch every job), nor when the results are within reach.

    .. versionadded:: 0.3
    """


@hookspec(firstresult=True)
def runjob_resume(
    job: JobSpec, submission: Submission, status: JobStatus, cluster: ClusterConfig, context: RunContext,
) -> ResumePlan | None:
    """Plan how to continue *submission* after it stopped early (time limit, preemption,
    a lost machine the backend marked ``resumable``).

    A backend whose machines vanish with their disks answers from where its checkpoints
    survive (a network volume, the Hub); the core's default looks in the attempt's
    checkpoint folder through ``context.transport_for(submission)``.

    :param job: The job's specification.
    :param submission: The attempt that stopped.
    :param status: How it stopped.
    :param cluster: The cluster the job ran on (its ``clusters.yaml`` entry).
    :param context: This invocation's context.
    :returns: A :class:`ResumePlan` naming the newest complete checkpoint and the
        environment the next attempt gets, or ``None`` when the job cannot resume.

    Result: routed to the job's backend, first non-None result; the core's default
    implementation (checkpoint folder, via the attempt's transport) runs last.

    .. versionadded:: 0.1
    .. versionchanged:: 0.2 the *job* parameter.
    .. versionchanged:: 0.3 the *cluster* parameter.
    """


@hookspec
def runjob_release(machine: Machine, submission: Submission | None, cluster: ClusterConfig, reason: str, context: RunContext) -> None:
    """Give back the machine :func:`runjob_provision` created (terminate the pod).

    Called right after a poll said the attempt ended, whatever the ending (completed,
    failed, cancelled, lost), once the core read its last log lines and copied its log,
    progress, metrics and results home through the attempt's transport
    (:mod:`runjob_core.collecting.harvest`); from then on
    ``context.transport_for(submission)`` reads that copy, so collect, ``runjob logs``
    and resume need no machine. Also called when submitting failed after provisioning.
    Called once per attempt (the store records ``released_at``); a runjob killed before
    the call leaves the attempt to the next ``runjob status`` or ``watch``, which makes it.
    Raise :class:`runjob_core.errors.BackendError` when the machine is still running
    afterwards (the provider's API lists it live): the core records ``release_failed``
    and calls again later. Must be idempotent: releasing a machine that is already gone
    is not an error. Keep what you need of the machine in its ``Machine.data`` (the core
    stores it with the attempt), not in files of your own.

    :param machine: The machine to release.
    :param submission: The attempt's submission, or ``None`` when it never got one.
    :param cluster: The cluster it belongs to.
    :param reason: Why, for your messages (``collected``, ``cancelled``, ``ended FAILED``,
        ``submit failed``).
    :param context: This invocation's context.

    Result: routed to the cluster's backend; return values are ignored.

    .. versionadded:: 0.2
    .. versionchanged:: 0.3 called right after the attempt ended (its files harvested
       first), not after collect.
    """


@hookspec
def runjob_references(context: RunContext) -> Iterable[Reference] | None:
    """Return benchmark references this plugin ships.

    Called during pre-flight to find the reference of ``job.benchmark`` by name or alias.

    :param context: This invocation's context.
    :returns: :class:`Reference` records (``rules`` are checked against the job spec).

    Result: called on every plugin; all references are used (the user's own project
    references win over a plugin's with the same name).

    .. versionadded:: 0.1
    """


@hookspec
def runjob_collected(
    job: JobSpec, submission: Submission, artifacts: Sequence[Artifact], problems: Sequence[str], dest: Path,
    cluster: ClusterConfig, context: RunContext,
) -> None:
    """Act on what a final collect brought home: report it, notify, index it.

    Called once per final collect of an attempt, after :func:`runjob_collect`'s artifacts
    were recorded, the ``collected`` (or ``collect_failed``) event written and the
    attempt's machine released: a slow implementation keeps no paid machine waiting. Not
    called for a peek at a running attempt (nothing is final then), nor when ``runjob
    collect`` finds the attempt collected already and its folder untouched (nothing new
    came); called again when a collect fetched a damaged folder anew. The core's own
    reporting (:mod:`runjob_core.reporting.plugin`: the ``results`` summary event, the
    activity log, the dashboard's sync) is an implementation of this hook, called last.

    :param job: The job's specification.
    :param submission: The attempt that was collected (the latest one).
    :param artifacts: Every artifact the collect recorded, in the order the plugins
        returned them (the backend's first); the kinds the core knows are the
        ``ARTIFACT_*`` constants of :mod:`runjob_core.models`. A plugin that broke in
        :func:`runjob_collect` appears as an ``ARTIFACT_PROBLEM`` artifact.
    :param problems: Why the collect did not succeed, one line each (the message of its
        ``collect_failed`` event); empty when it succeeded.
    :param dest: The job's local results folder (``./results/<job name>/``), complete
        as collected. Read it; do not change it (the folder's manifest records what the
        collect brought, and a changed file is fetched again by the next collect).
    :param cluster: The cluster the attempt ran on.
    :param context: This invocation's context.

    Result: routed (the job's backend, plus every non-backend plugin); return values
    are ignored. A plugin that raises is recorded as a ``plugin_error`` of the job (the
    one plugin-error path) and the others are still called; the collect's own result
    does not change.

    .. versionadded:: 0.3
    """


# ---------------------------------------------------------------------------- adoption (issue 34)


@hookspec(firstresult=True)
def runjob_list_tagged(cluster: ClusterConfig, context: RunContext) -> Iterable[TaggedJob] | None:
    """Every live job on *cluster* that carries a runjob tag, whichever store submitted it.

    Called by ``runjob status --adopt`` and before a submit finds nothing in the store: a
    store that was lost or set aside forgets jobs the cluster still runs, and the core
    rebuilds their records from the ``runjob.json`` the core staged in each job's folder
    (name, kind, spec, spec hash, the runjob folder that submitted it), then reattaches
    them through :func:`runjob_reattach`. One remote call (one ``squeue --me``, one API
    list), never one per job; jobs that ended may be left out.

    :param cluster: The cluster to list.
    :param context: This invocation's context.
    :returns: One :class:`TaggedJob` per job whose tag (the SLURM comment, the pod name,
        the runner's files) starts with ``runjob:``; ``job_dir`` where the backend knows
        the job's folder (``attempt.layout.job_dir``), ``spec_hash`` where it carries the
        hash itself, ``machine`` where each job has its own (the core reads the folder
        through it). ``None``: your backend cannot list (the core says so in one line).
    :raises runjob_core.errors.TransportError: The cluster cannot be asked now; never
        answer an empty list for "could not ask".

    Result: routed to the cluster's backend; the first non-None result wins.

    .. versionadded:: 0.3
    """
