"""The phases of a job as library functions; the CLI commands and :mod:`runjob_core.api`
are thin wrappers around them. The collect phase is :mod:`runjob_core.lifecycle.collect_phase` and
the machine's release :mod:`runjob_core.lifecycle.machines`; their names are importable from here.

Every phase records what it did as events in the store (the activity log). The hooks a
phase calls get everything they need as parameters (:mod:`runjob_core.hookspecs`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from runjob_core import _plugin_errors, config, plugins, staging, templating
from runjob_core.transport.held import HeldTree, hold_tree

from runjob_core.context import RunContext, offline_context  # noqa: F401 - offline_context is re-exported
from runjob_core.errors import BackendError, ConfigError, RefusedError, RunjobError, TransportError
from runjob_core.lifecycle.collect_phase import Collected, collect, peek, stored_status  # noqa: F401 - the collect phase
from runjob_core.lifecycle.machines import job_cluster, release, release_attempt  # noqa: F401 - used by every phase
from runjob_core.models import (
    ACTIVE_STATES, SUBMITTING, Attempt, ClusterConfig, Estimate, JobSpec, Machine, Rendered, Submission,
)
from runjob_core.store import AttemptRow, JobRow, Store, attempt_tag, new_job_id, state_dir


def open_context(
    *, clusters_path: Path | None = None, on_event: Callable[..., None] | None = None, pm=None, store: Store | None = None
) -> RunContext:
    """Load clusters and plugins and open the state store of the working directory."""
    if pm is None:
        pm, _infos = plugins.get_plugin_manager()
    clusters = config.load_clusters(clusters_path, backends=plugins.backend_infos(pm))
    folder = state_dir()
    return RunContext(store=store or Store.open_default(), pm=pm, clusters=clusters, state_dir=folder, on_event=on_event)


def cluster_for(context: RunContext, job: JobSpec) -> ClusterConfig:
    cluster = context.clusters.get(job.cluster)
    if cluster is None:
        known = ", ".join(sorted(context.clusters))
        raise ConfigError(job.source, [f"unknown cluster {job.cluster!r} at $.cluster in {job.source}; known clusters: {known}"])
    plugins.require_backend(context.pm, cluster.type, cluster=cluster.name)
    return cluster


def apply_canary(job: JobSpec) -> JobSpec:
    """The canary variant of *job*: same spec, a row limit and a shorter time limit."""
    resources = job.resources
    if job.canary.time is not None:
        resources = attrs.evolve(resources, time=job.canary.time)
    upload = job.upload
    if upload.repo:
        upload = attrs.evolve(upload, repo=f"{upload.repo}-canary")
    return attrs.evolve(job, resources=resources, upload=upload)


# ---------------------------------------------------------------------------- pre-flight


@attrs.frozen
class Preflight:
    estimates: tuple[Estimate, ...]
    problems: tuple[str, ...]
    warnings: tuple[str, ...]

    @property
    def refused(self) -> bool:
        return bool(self.problems)


def preflight(context: RunContext, job: JobSpec, cluster: ClusterConfig, *, canary: bool = False) -> Preflight:
    """Estimates (memory, time), the benchmark reference's rules: what would make the job fail
    or give a wrong number, before anything waits in a queue."""
    caller = context.hook("runjob_estimate", cluster.type)
    estimates = plugins.call_each(caller, {"job": job, "cluster": cluster, "context": context},
                                  on_error=lambda name, exc: _plugin_errors.record(context, None, "runjob_estimate", name, exc))
    if any("time" in e.data for e in estimates):
        from runjob_core.estimator import time_gate  # segments against the limit, GPU-hours at the backend's price

        estimates = time_gate.finish(job, estimates)
    problems = [f"{e.source}: {e.summary}" + (f" (try: {'; '.join(e.suggestions)})" if e.suggestions else "")
                for e in estimates if e.fits is False]
    remote = bool(cluster.host) or context.backend_info(cluster.type).machine_per_job
    unsynced = staging.unsynced_command_files(job) if remote else []
    if unsynced:
        problems.append(f"runjob: the command names {', '.join(unsynced)} beside {job.source or 'the job file'}, but "
                        f"nothing is uploaded to {cluster.name} without 'workdir:'; add 'workdir: .' to the job file "
                        "(that folder is synced to the job's own work copy, .gitignore honoured)")
    # An estimate may warn without refusing (a job that needs resume segments): data["warnings"].
    warned = tuple(w for e in estimates if e.fits is not False for w in e.data.get("warnings", ()))
    if not (job.benchmark or job.data.input):
        return Preflight(tuple(estimates), tuple(problems), warned)  # nothing a reference could be about
    from runjob_core import references

    refs = references.all_references(plugin_refs=references.plugin_references(context))
    review = references.review_job(job, refs, canary=canary)
    return Preflight(tuple(estimates), tuple(problems) + tuple(review.problems), warned + tuple(review.warnings))


# ---------------------------------------------------------------------------- render


def templates_for(context: RunContext):
    """The Jinja2 environment of this invocation's plugins and user templates: made once per
    context (a sweep's 1,000 elements render with one; Jinja2 still reloads a template whose
    file changed), again if the user's template folder appears or the plugins change."""
    plugin_objects = [p for _name, p in context.pm.list_name_plugin() if p is not None]
    user_dir = user_templates_dir()
    key = (str(user_dir.resolve()) if user_dir is not None else None, tuple(id(p) for p in plugin_objects))
    made = context.core_memory.templates
    if key not in made:
        made[key] = templating.make_environment(user_dir=user_dir, plugins=plugin_objects)
    return made[key]


def user_templates_dir() -> Path | None:
    """The user's template folder (``.runjob/templates`` here), searched before any plugin's."""
    folder = Path(".runjob/templates")
    return folder if folder.is_dir() else None


@contextlib.contextmanager
def templates_held(context: RunContext):
    """:func:`templates_for`'s environment with its templates held as they are for the block:
    Jinja2 checks each template's file before every render (two ``stat`` an element, ~10% of a
    1,000-element sweep's submit), and the elements of one array should render from one
    version of the templates anyway."""
    templates = templates_for(context)
    reloading = templates.auto_reload
    templates.auto_reload = False
    try:
        yield templates
    finally:
        templates.auto_reload = reloading


def prepared_templates(pm) -> dict[Any, Any]:
    """What :func:`templates_for` makes for *pm*'s plugins in a folder without
    ``.runjob/templates``, every template compiled: the warm process makes it once for its
    children (:class:`runjob_core.plugins.Prepared`), each of which loaded and ran the compiled
    templates again (~2 ms, more on a loaded machine). Jinja2 still reloads one whose file changed."""
    import jinja2

    plugin_objects = [p for _name, p in pm.list_name_plugin() if p is not None]
    env = templating.make_environment(plugins=plugin_objects)
    for name in env.list_templates(extensions=["j2"]):
        try:
            env.get_template(name)
        except (jinja2.TemplateError, UnicodeDecodeError, OSError):
            continue  # a broken or unreadable template: the command that renders it says what is wrong
    return {(None, tuple(id(p) for p in plugin_objects)): env}


def new_attempt(
    context: RunContext, job: JobSpec, cluster: ClusterConfig, *, job_id: str, n: int, resume_from: str | None = None,
    resume_env: dict[str, str] | None = None, limit: int | None = None, machine: Machine | None = None,
) -> Attempt:
    """The :class:`Attempt` record the hooks get: tag and file layout of attempt *n*."""
    info = context.backend_info(cluster.type)
    # A backend that creates its machine per attempt has no host to ask yet: its layout
    # comes from the cluster's scratch_path alone.
    transport = None if info.machine_per_job and machine is None else context.transport(cluster, machine)
    layout = staging.layout_for(job, cluster, job_id, n, transport, context.state_dir)
    return Attempt(job_id=job_id, n=n, tag=attempt_tag(job_id, n), layout=layout, resume_from=resume_from,
                   resume_env=resume_env or {}, limit=limit, machine=machine)


def render(context: RunContext, job: JobSpec, attempt: Attempt, cluster: ClusterConfig, *, templates=None) -> Rendered:
    """Render the script of *attempt* (with *templates*, :func:`templates_for`'s, when the
    caller renders many: a sweep's array asks for them once, not once per element)."""
    caller = context.hook("runjob_render", cluster.type)
    rendered = caller(job=job, attempt=attempt, cluster=cluster, templates=templates or templates_for(context),
                      context=context)
    if rendered is None:
        raise RunjobError(f"no plugin rendered a script for backend {cluster.type!r}")
    return staging.per_attempt(rendered, attempt.layout)


def render_preview(context: RunContext, job: JobSpec, cluster: ClusterConfig, *, limit: int | None = None) -> Rendered:
    """Render with placeholder ids, without touching the store or the cluster's files."""
    attempt = new_attempt(context, job, cluster, job_id="rj-preview", n=1, limit=limit)
    return render(context, job, attempt, cluster)


def review_rows(job: JobSpec, cluster: ClusterConfig, rendered: Rendered | None = None) -> list[tuple[str, str]]:
    from runjob_core.config import options

    res = job.resources
    gpus = f"{res.gpus} x {res.gpu_type or cluster.gpu_type or 'any'}" if res.gpus else "none"
    rows = [
        ("job", job.name), ("cluster", f"{cluster.name} ({cluster.type})"),
        # Where the job goes on the cluster, in the backend's words (SLURM: partition, account).
        *options.describe(cluster, job), ("GPUs", gpus),
        ("CPUs / memory", f"{res.cpus} / {res.mem or '(default)'}"), ("time limit", res.time or "(default)"),
        ("template", job.template), ("model", job.model.path or job.model.name or "-"),
        ("input", job.data.input or "-"), ("output", job.data.output),
        ("max_tokens", str(job.model.max_tokens) if job.model.max_tokens is not None else "-"),
        ("max_model_len", str(job.model.max_model_len) if job.model.max_model_len is not None else "-"),
        ("params", json.dumps(job.params, sort_keys=True) if job.params else "-"),
        ("command", job.command.strip().splitlines()[0] + (" ..." if len(job.command.strip().splitlines()) > 1 else "")),
    ]
    if rendered is not None:
        rows.append(("script", f"{len(rendered.script.splitlines())} lines from {rendered.template}"))
    return rows


# ---------------------------------------------------------------------------- the gate


@attrs.frozen
class Launched:
    """What :func:`launch` did: the job row, its submission and the pre-flight verdict."""

    row: JobRow
    submission: Submission
    preflight: Preflight | None
    kind: str


def launch(
    context: RunContext, job: JobSpec, *, spec_path: str | None = None, canary: bool = False, force: bool = False,
    new: bool = False, confirm: Callable[[JobSpec, ClusterConfig, Rendered], bool] | None = None,
    failed_canary: bool | Callable[[str], bool] = False, on_preflight: Callable[[Preflight], None] | None = None,
) -> Launched:
    """The one gate every submission goes through: cluster -> canary -> pre-flight ->
    refusal -> review -> submit. ``runjob run``, ``runjob submit`` and
    :meth:`runjob_core.api.Session.submit` all call it.

    *canary* submits the job's canary variant (row limit, shorter time, own results). For a
    full job whose last canary failed, *failed_canary* decides: ``True`` goes on, ``False``
    refuses, a callable is asked with the warning. Pre-flight problems refuse the job
    unless *force*. *confirm* is the review (``None``: no review).
    """
    cluster = cluster_for(context, job)
    if not context.backend_info(cluster.type).machine_per_job:
        context.transport(cluster).warm()
    kind = "full"
    if canary:
        job, kind = apply_canary(job), "canary"
    else:
        warning = failed_canary_warning(context, job)
        if warning is not None:
            go_on = failed_canary(warning) if callable(failed_canary) else failed_canary
            if not go_on:
                raise RefusedError(f"{warning}; pass --yes to run the full job anyway (failed_canary=True from Python), "
                                   "or run the canary again")
    checks = preflight(context, job, cluster, canary=canary)
    if on_preflight is not None:
        on_preflight(checks)
    if checks.refused and not force:
        raise RefusedError("pre-flight refused the job:\n  " + "\n  ".join(checks.problems) + "\n(pass --force to submit anyway)")
    row, submission = submit(context, job, cluster, spec_path=spec_path, kind=kind, new=new, confirm=confirm)
    record_estimates(context.store, row, checks)
    return Launched(row, submission, checks, kind)


def record_estimates(store: Store, row: JobRow, checks: Preflight) -> None:
    """Keep pre-flight's estimates with the job (once), for the report's estimate-versus-actual."""
    if not checks.estimates or store.events(row.id, kinds=("estimates",)):
        return
    message, data = estimates_event(checks)
    store.add_event(row.id, "estimates", message, data=data)


def estimates_event(checks: Preflight) -> tuple[str, dict]:
    """The message and data of the "estimates" event :func:`record_estimates` writes."""
    items = [{"source": e.source, "summary": e.summary, "fits": e.fits, "data": e.data} for e in checks.estimates]
    return f"{len(items)} pre-flight estimates", {"estimates": items}


def failed_canary_warning(context: RunContext, job: JobSpec) -> str | None:
    """Why the full job should wait: its last canary did not end well (else ``None``)."""
    canary = context.store.latest_canary(job.name)
    if canary is None or canary.state == "COMPLETED" and not (canary.outcome or "").startswith(("stopped", "failed")):
        return None
    return f"the last canary of {job.name} ({canary.id}) ended {canary.state}: {canary.outcome or 'see runjob report ' + canary.id}"


# ---------------------------------------------------------------------------- submit


def submit(
    context: RunContext, job: JobSpec, cluster: ClusterConfig, *, spec_path: str | None = None,
    kind: str = "full", new: bool = False,
    confirm: Callable[[JobSpec, ClusterConfig, Rendered], bool] | None = None, sweep: tuple[str, int] | None = None,
) -> tuple[JobRow, Submission]:
    """Submit *job* as a new runjob job, or reattach to the same spec already submitted.

    No pre-flight here: :func:`launch` is the gate that runs it. A job with the same name
    and spec hash whose latest attempt is still active is returned as it is (unless
    *new*); one stuck in SUBMITTING (runjob was killed while submitting) is reattached
    through its tag, and only submitted if the backend has no job with that tag; one the
    store does not know but the cluster runs (a lost store) is adopted (:mod:`runjob_core.adopt`).
    *sweep* is (sweep id, element index) for an element of a sweep (:mod:`runjob_core.sweep`).
    """
    spec_json, spec_hash = config.spec_json_and_hash(job)
    # One writer per spec: of runjob processes submitting the same spec at once, one creates
    # the job and the others find it here and follow it (see runjob_core.store.leases).
    claim = f"spec:{job.name}:{spec_hash}:{kind}"
    if not new:
        with context.store.claim(claim):
            followed = _follow_existing(context, job, cluster, spec_hash, kind)
            if followed is None:
                # The store knows nothing of this spec: a lost store may have submitted it.
                from runjob_core import adopt

                followed = adopt.follow_running(context, job, cluster, spec_hash, kind)
        if followed is not None:
            return followed
    # Render and review before anything is recorded: a refusal leaves nothing behind.
    job_id = new_job_id()
    attempt = new_attempt(context, job, cluster, job_id=job_id, n=1, limit=job.canary.limit if kind == "canary" else None)
    rendered = render(context, job, attempt, cluster)
    if confirm is not None and not confirm(job, cluster, rendered):
        raise RefusedError("not submitted: the review was not confirmed")
    with context.store.claim(claim):
        followed = None if new else _follow_existing(context, job, cluster, spec_hash, kind)
        if followed is not None:
            return followed  # submitted by another process while this one was reviewing
        context.store.create_job(
            job_id=job_id, name=job.name, cluster=cluster.name, backend=cluster.type, spec_json=spec_json,
            spec_hash=spec_hash, spec_path=spec_path, kind=kind,
            sweep_id=sweep[0] if sweep else None, sweep_index=sweep[1] if sweep else None,
        )
        row = context.store.get_job(job_id)
        context.event(job_id, "created", f"job {job.name} recorded as {job_id} ({kind}, spec {spec_hash})")
        return row, _submit_attempt(context, row, job, cluster, attempt_row=None, attempt=attempt, rendered=rendered)


def _follow_existing(context, job: JobSpec, cluster: ClusterConfig, spec_hash: str, kind: str):
    """(row, submission) of the same spec already submitted and not yet finished with: an
    active attempt, one left SUBMITTING (reattached by its tag), an ended one whose resume was
    not done yet, or a completed job whose results were never collected (a kill between the
    end and collect)."""
    store = context.store
    found = (store.find_active(job.name, spec_hash, kind) or store.find_pending(job.name, spec_hash, kind)
             or store.find_uncollected(job.name, spec_hash, kind))
    if found is None:
        return None
    row = store.get_job(found.job_id)
    if found.state != "SUBMITTING":
        context.event(row.id, "reattached", f"{job.name} is already submitted as {row.id} ({found.state}); following it",
                      attempt=found.n)
        return row, found.submission
    return row, _submit_attempt(context, row, job, cluster, attempt_row=found)


def _reattach(context: RunContext, row: JobRow, job: JobSpec, cluster: ClusterConfig, attempt_row: AttemptRow) -> Submission | Attempt:
    """Killed while submitting: ask the backend whether the job with this tag exists.
    Returns its submission, or the attempt to submit again (with its machine, if one was made)."""
    attempt = new_attempt(context, job, cluster, job_id=row.id, n=attempt_row.n, resume_from=attempt_row.resumed_from,
                          limit=_limit(row, job), machine=attempt_row.machine)
    found = _plugin_errors.call_first(context, context.hook("runjob_reattach", cluster.type),
                                      {"job": job, "attempt": attempt, "tag": attempt.tag, "cluster": cluster, "context": context},
                                      hook="runjob_reattach", blame=cluster.type, job_id=row.id, attempt=attempt.n)
    if found is None:
        return attempt
    if context.store.get_job(row.id).script is None:
        # Interrupted before its script was stored (a sweep's array stores them with the
        # submissions): the script this attempt was made from, rendered again.
        context.store.set_job(row.id, script=render(context, job, attempt, cluster).script)
    context.store.record_submission(row.id, attempt.n, config.record_to_json(found), found.backend_job_id, found.submitted_at)
    context.event(row.id, "reattached", f"found {found.backend_job_id} by its tag {attempt.tag}; not submitting again",
                  attempt=attempt.n, source=found.source)
    return found


def _submit_attempt(context, row: JobRow, job: JobSpec, cluster: ClusterConfig, *, attempt_row: AttemptRow | None,
                    attempt: Attempt | None = None, rendered: Rendered | None = None,
                    resume_from: str | None = None, resume_env: dict[str, str] | None = None,
                    accept_code_changes: bool = False) -> Submission:
    # One writer per job: creating, submitting or reattaching an attempt holds submit:<id>.
    with context.store.claim(f"submit:{row.id}"):
        return _submit_attempt_claimed(context, row, job, cluster, attempt_row=attempt_row, attempt=attempt,
                                       rendered=rendered, resume_from=resume_from, resume_env=resume_env,
                                       accept_code_changes=accept_code_changes)


def _submit_attempt_claimed(context, row: JobRow, job: JobSpec, cluster: ClusterConfig, *, attempt_row: AttemptRow | None,
                            attempt: Attempt | None = None, rendered: Rendered | None = None,
                            resume_from: str | None = None, resume_env: dict[str, str] | None = None,
                            accept_code_changes: bool = False) -> Submission:
    store = context.store
    if attempt_row is not None:
        # Read again now that this process holds submit:<id>: the row was read before, and the
        # process that held the claim meanwhile may have submitted this very attempt (asking the
        # backend by its tag cannot always tell: a local job of another host).
        current = store.attempt(row.id, attempt_row.n)
        if current.submission_json:
            context.event(row.id, "reattached", f"attempt {current.n} was submitted by another runjob process meanwhile "
                          f"({current.backend_job_id}); following it", attempt=current.n)
            return current.submission
        if current.state != SUBMITTING:
            raise RunjobError(f"attempt {current.n} of job {row.id} was settled by another runjob process meanwhile "
                              f"({current.state}); see runjob status {row.id}")
        found = _reattach(context, row, job, cluster, attempt_row)
        if isinstance(found, Submission):
            return found
        attempt, rendered = found, None
    else:
        if attempt is None:
            latest = store.latest_attempt(row.id)
            n = latest.n + 1 if latest else 1
            attempt = new_attempt(context, job, cluster, job_id=row.id, n=n, resume_from=resume_from,
                                  resume_env=resume_env, limit=_limit(row, job))
        attempt_row = store.begin_attempt(row.id, resumed_from=resume_from)
        if attempt_row.tag != attempt.tag:
            # Another process began an attempt of this job meanwhile: ours takes the next number.
            attempt = new_attempt(context, job, cluster, job_id=row.id, n=attempt_row.n, resume_from=resume_from,
                                  resume_env=resume_env, limit=_limit(row, job))
            rendered = None
    n = attempt.n
    if attempt.machine is None:
        attempt = _provision(context, row, job, cluster, attempt)
        if attempt.machine is not None:
            rendered = None  # paths may depend on the machine
    if rendered is None:
        rendered = render(context, job, attempt, cluster)
    store.set_job(row.id, script=rendered.script)
    asked = False  # once the backend is asked, only it knows whether the job exists
    try:
        # The job's files wait for the backend's submit command: one round trip (transport/held.py).
        transport = hold_tree(context.transport(cluster, attempt.machine))
        code = staging.stage(transport, attempt.layout, job, rendered, accept_changes=accept_code_changes,
                             started_with=_code_started_with(context, row.id, n),
                             record=staging.job_record(row, context.state_dir))
        if code is not None:
            _record_code(context, row.id, n, code)
        asked = True
        submission = _plugin_errors.call_first(
            context, context.hook("runjob_submit", cluster.type),
            {"job": job, "attempt": attempt, "rendered": rendered, "cluster": cluster, "transport": transport, "context": context},
            hook="runjob_submit", blame=cluster.type, job_id=row.id, attempt=n)
        if isinstance(transport, HeldTree):
            transport.flush()  # a backend that ran no command: its job's files are in place all the same
    except TransportError as exc:
        # The job may or may not have reached the scheduler: keep the attempt in
        # SUBMITTING so that running the command again finds it by its tag.
        context.event(row.id, "submit_uncertain", f"connection lost while submitting ({exc}); run the same command "
                      "again: it finds the job by its tag or submits it", attempt=n)
        raise
    except RunjobError as exc:
        _forget_attempt(context, row, attempt, cluster, reason=f"submit failed: {exc}")
        if not isinstance(exc, RefusedError):  # a refusal (changed code) is the command's one line, not an event
            kind = "rejected" if isinstance(exc, BackendError) else "submit_failed"
            # A plugin's bug was shown once already (plugin_error); the CLI prints it again as its error.
            context.event(row.id, kind, str(exc), attempt=n, quiet=isinstance(exc, _plugin_errors.PluginError))
        raise
    except BaseException as exc:
        if asked and isinstance(exc, (KeyboardInterrupt, SystemExit)):
            # Ctrl-C while (or just after) the scheduler took the job: handled like a lost
            # connection. The attempt stays SUBMITTING; the next command reattaches it by its tag.
            context.event(row.id, "submit_uncertain", f"interrupted while submitting ({type(exc).__name__}); "
                          f"`runjob status {row.id}` finds the job by its tag, `runjob resume {row.id}` submits it if "
                          "the backend never got it", attempt=n)
            raise
        # A bug in a plugin (or ^C before the backend was asked): a rented machine must not outlive the attempt.
        _forget_attempt(context, row, attempt, cluster, reason="submit failed")
        raise
    if submission is None:
        _forget_attempt(context, row, attempt, cluster, reason="no backend submitted it")
        raise BackendError(f"backend {cluster.type!r} did not submit the job")
    store.record_submission(row.id, n, config.record_to_json(submission), submission.backend_job_id, submission.submitted_at)
    what = f"resumed from {resume_from}" if resume_from else ("resubmitted" if n > 1 else "submitted")
    context.event(row.id, "submitted", f"attempt {n} {what} as {cluster.type} job {submission.backend_job_id} on {cluster.name}",
                  attempt=n, source=submission.source, backend_job_id=submission.backend_job_id, log=submission.log_path)
    return submission


def _runs_a_copy(context: RunContext, cluster: ClusterConfig) -> bool:
    """Whether jobs of *cluster* run a synced copy of their workdir (any remote host), not the
    folder itself (this machine): only a copy keeps the code its job started with."""
    from runjob_core.transport import LocalTransport

    if context.backend_info(cluster.type).machine_per_job:
        return True
    return not isinstance(context.transport(cluster), LocalTransport)


def _code_started_with(context: RunContext, job_id: str, n: int) -> dict[str, str] | None:
    """The workdir hashes the job's earlier attempts ran (None for its first attempt)."""
    earlier = [e for e in context.store.events(job_id, kinds=("code",)) if e.attempt is not None and e.attempt < n]
    return earlier[-1].data.get("files") if earlier else None


def _record_code(context: RunContext, job_id: str, n: int, hashes: dict[str, str]) -> None:
    """The code attempt *n* runs, by content: the report names its hash, a resume compares against it."""
    digest = staging.code_hash(hashes)
    earlier = _code_started_with(context, job_id, n)
    changed = earlier is not None and staging.code_hash(earlier) != digest
    context.event(job_id, "code", f"attempt {n} runs code {digest} ({len(hashes)} files)"
                  + (f"; changed since the earlier attempt ({staging.code_hash(earlier)}), accepted with --force" if changed else ""),
                  attempt=n, data={"code_hash": digest, "files": hashes})


def _provision(context: RunContext, row: JobRow, job: JobSpec, cluster: ClusterConfig, attempt: Attempt) -> Attempt:
    """Ask the backend for a machine (most have a standing host and answer None); record it
    with the attempt before anything else, so a restarted runjob can find or release it."""
    try:
        machine = _plugin_errors.call_first(context, context.hook("runjob_provision", cluster.type),
                                            {"job": job, "attempt": attempt, "cluster": cluster, "context": context},
                                            hook="runjob_provision", blame=cluster.type, job_id=row.id, attempt=attempt.n)
    except RunjobError as exc:
        _forget_attempt(context, row, attempt, cluster, reason=f"provisioning failed: {exc}")
        context.event(row.id, "rejected" if isinstance(exc, BackendError) else "submit_failed", str(exc), attempt=attempt.n)
        raise
    if machine is None:
        return attempt
    context.store.update_attempt(row.id, attempt.n, machine_json=config.record_to_json(machine))
    where = f" at {machine.host}:{machine.port}" if machine.host else ""
    context.event(row.id, "provisioned", f"attempt {attempt.n}: machine {machine.id}{where}", attempt=attempt.n,
                  source=machine.source, machine=machine.id)
    # The same attempt, given its machine: only the file layout depends on where it runs.
    layout = staging.layout_for(job, cluster, row.id, attempt.n, context.transport(cluster, machine), context.state_dir)
    return attrs.evolve(attempt, machine=machine, layout=layout)


def _forget_attempt(context: RunContext, row: JobRow, attempt: Attempt, cluster: ClusterConfig, *, reason: str) -> None:
    """An attempt that never reached the backend: release its machine, drop the record."""
    if attempt.machine is not None:
        release(context, row.id, attempt.n, attempt.machine, None, cluster, reason=reason)
    store = context.store
    store.delete_attempt(row.id, attempt.n)
    latest = store.latest_attempt(row.id)
    store.set_job(row.id, state=latest.state if latest else "REJECTED", outcome=reason)


def _limit(row: JobRow, job: JobSpec) -> int | None:
    return job.canary.limit if row.kind == "canary" else None


def resubmit(context: RunContext, row: JobRow, *, resume_from: str | None, resume_env: dict[str, str],
             after: int | None = None, accept_code_changes: bool = False) -> Submission | None:
    """Attempt n+1 of the same job and the same spec (same spec hash: nothing changed).

    *after* is the attempt the caller saw last: when another process has resubmitted since
    (the latest attempt is no longer *after*), nothing is submitted and None is returned."""
    job = row.spec
    if config.spec_hash(job) != row.spec_hash:
        raise RunjobError(f"the stored spec of {row.id} no longer matches its hash; refusing to resume a changed experiment")
    cluster = cluster_for(context, job)
    if job.workdir and not accept_code_changes and _runs_a_copy(context, cluster):
        # Changed code is refused before an attempt is recorded: the job's own record stays as it was.
        latest = context.store.latest_attempt(row.id)
        started_with = _code_started_with(context, row.id, latest.n + 1 if latest else 1)
        staging.check_code(Path(job.base_dir, job.workdir).resolve(), job, started_with, accept_changes=False)
    with context.store.claim(f"submit:{row.id}"):
        latest = context.store.latest_attempt(row.id)
        if after is not None and latest is not None and latest.n != after:
            context.event(row.id, "reattached", f"attempt {latest.n} was already submitted by another runjob process; "
                          "following it", attempt=latest.n)
            return None
        return _submit_attempt(context, row, job, cluster, attempt_row=None, resume_from=resume_from, resume_env=resume_env,
                               accept_code_changes=accept_code_changes)


# ---------------------------------------------------------------------------- cancel


def cancel(context: RunContext, row: JobRow, *, reason: str = "cancelled by the user", wait: float | None = None,
           force: bool = False) -> list[str]:
    """Cancel the job's active attempts, confirmed: each is ``CANCELLING`` until a poll says
    how it ended (``CANCELLED``, or its own ending if it beat the cancel). Returns the
    backend ids asked. :mod:`runjob_core._cancel` has the rules.

    :raises runjob_core._cancel.CancelNotConfirmedError: not ended within *wait* seconds
        (unless *force*, which then forgets it: that stops nothing).
    """
    from runjob_core import _cancel, interrupted

    if interrupted.drop(context, row):  # interrupted before the backend took it (no job has its tag): nothing runs
        return []
    return _cancel.cancel(context, row, reason=reason, wait=_cancel.CONFIRM_SECONDS if wait is None else wait, force=force)


def forget(context: RunContext, row: JobRow) -> list[int]:
    """Stop following a job runjob can no longer reach, without asking its backend; recorded
    as FORGOTTEN, not stopped. Returns the attempt numbers forgotten."""
    from runjob_core import _cancel

    return _cancel.forget(context, row)


def stop(context: RunContext, row: JobRow, *, reason: str) -> list[str]:
    """Ask the backend to cancel the job's active attempts, and leave their final state to
    the monitor's next poll: a job that was already ending (killed for memory, say) keeps
    the scheduler's word for how it ended instead of runjob's CANCELLED."""
    from runjob_core import _cancel

    attempts = [a for a in context.store.attempts(row.id) if a.state in ACTIVE_STATES and a.submission_json]
    done = _cancel.ask(context, row, attempts) if attempts else set()
    for attempt in attempts:
        if attempt.submission.backend_job_id in done:
            context.event(row.id, "stopping", f"attempt {attempt.n} ({attempt.backend_job_id}): {reason}", attempt=attempt.n)
    return sorted(done)
