"""The monitor: poll every active job (batched per cluster), read only new log bytes,
run the health checks, record findings and apply their actions.

Killed and restarted, the monitor carries on from the log offsets and states in the
store. One cycle makes one ``runjob_poll`` call per cluster, whatever the number of jobs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import attrs

from runjob_core import _plugin_errors, lifecycle, plugins
from runjob_core.collecting import harvest

from runjob_core.monitor import checkpoint_cause as _checkpoint_cause

from runjob_core.monitor import memo as _cyclememo

from runjob_core.monitor import log_progress as _log_progress

from runjob_core.monitor import push as _watch

from runjob_core.gpu import telemetry as gpu_telemetry
from runjob_core.context import RunContext
from runjob_core.store.faults import StoreError, StoreTransientError
from runjob_core.errors import RunjobError, TransportError
from runjob_core.reporting import history as metrics_history
from runjob_core.models import (
    ACTIVE_STATES, CANCELLED, CANCELLING, COMPLETED, FAILED, LOST, NODE_FAIL, PENDING, PREEMPTED, RUNNING, SUBMITTING, TIMEOUT, Finding, JobStatus, Submission,
)
from runjob_core.store import AttemptRow, JobHead

#: runjob_core.job.RESUME_EXIT_CODE: the job stopped early on purpose and wants resuming.
RESUME_EXIT_CODE = 75

#: Read at most this much new log per job per cycle; the rest comes next cycle.
MAX_WINDOW_BYTES = 8 << 20
RESUMABLE_STATES = {TIMEOUT: "max_timeouts", PREEMPTED: "max_preemptions", NODE_FAIL: "max_preemptions"}
#: The one monitor that follows a job holds ``observe:<job id>`` for this long, renewed every
#: cycle; the other processes watching it show what the store says (runjob_core.store.leases).
OBSERVE_LEASE_SECONDS = 120.0
#: A monitor that only follows (another one observes) reads the store at least this often.
FOLLOW_INTERVAL = 2.0


@attrs.define
class JobView:
    """What the live table shows for one job."""

    job_id: str
    name: str
    attempt: int
    state: str
    reason: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    step: int | None = None
    rows_done: int | None = None
    total: int | None = None
    findings: list[str] = attrs.field(factory=list)
    outcome: str | None = None


@attrs.define
class CycleResult:
    changed: bool
    views: dict[str, JobView]
    finished: set[str]
    #: Jobs another process observes: this one shows their stored state.
    followed: set[str] = attrs.field(factory=set)
    #: A job's state changed (not just new log lines): the poll cadence starts over.
    state_changed: bool = False


def cycle(context: RunContext, job_ids: list[str] | None = None, *, woken: dict[str, set[str]] | None = None,
          keep_leases: bool = False) -> CycleResult:
    """One monitoring pass. *woken* (from :func:`_watch.wait_for_wakeup`) limits it to the
    jobs the push path reported: the scheduler is polled only if one of them needs it
    (a start or end marker), the others' new log lines are read with their last status.

    The jobs this process observes are leased to it (``observe:<job id>``): one writer per
    job; *keep_leases* (``watch``) keeps them between cycles."""
    store = context.store
    _plugin_errors.next_cycle(context)
    unreachable: set[str] = set()  # jobs whose backend's poll keeps failing (marked with what to do)
    grouped, rows = _cyclememo.groups(context, job_ids, _submission)
    # `watch` leases every job it follows up front and keeps them; a one-shot cycle leases a
    # job only when it has something to record (see _lease_to_record), so an unchanged
    # `runjob status` writes nothing at all.
    by_cluster, followed = _observed_here(context, grouped) if keep_leases else _observed_elsewhere(context, grouped)
    changed = _finish_pending(context, job_ids)
    changed = harvest.settle_leftovers(context, job_ids) or changed  # machines a killed runjob left out
    views: dict[str, JobView] = {}
    seen = _cyclememo.seen(context)
    observed: dict[str, str] = {}  # job id -> its state before this cycle
    for cluster_name, (group, submissions) in by_cluster.items():
        cluster = context.clusters.get(cluster_name)
        if cluster is None:
            for attempt in group:
                context.event(attempt.job_id, "warning", f"cluster {cluster_name!r} is not in clusters.yaml; cannot poll", attempt=attempt.n)
            continue
        watch = _watch.for_cluster(context, cluster)
        pushed = watch is not None and watch.alive
        polled = _watch.needs_poll(group, woken, seen)
        statuses: dict[str, JobStatus] = {}
        to_observe: list[tuple[AttemptRow, Submission, JobStatus, set[str] | None]] = []
        if polled:
            try:
                statuses = context.hook("runjob_poll", cluster.type)(submissions=submissions, cluster=cluster, context=context) or {}
            except TransportError as exc:
                # Transient: the connection dropped; the transport reconnects next cycle.
                for attempt in group:
                    context.event(attempt.job_id, "transient", f"poll failed, will retry: {exc}", attempt=attempt.n)
                continue
            except RunjobError as exc:
                for attempt in group:
                    context.event(attempt.job_id, "transient", f"poll failed, will retry: {exc}", attempt=attempt.n)
                continue
            except Exception as exc:  # a bug in the backend: its own jobs wait, every other cluster carries on
                unreachable |= _plugin_errors.poll_failed(context, group, "runjob_poll", cluster.type, exc)
                continue
            _watch.count_poll(context, woken, group, cluster_name)
        for attempt, submission in zip(group, submissions):
            job_id = attempt.job_id
            last = seen.get(job_id)
            causes = woken.get(job_id) if woken else None
            if polled:
                status = statuses.get(attempt.backend_job_id) or JobStatus(
                    state=LOST, source="runjob-core", reason="the backend did not report this job"
                )
                # The common case at scale, inlined: a queued job whose status object came back as is.
                if last is not None and last.queued and status is last.status and attempt is last.attempt and not causes:
                    views[job_id] = last.view
                    continue
            elif causes and last is not None:
                status = last.status
            elif last is not None:
                views[job_id] = last.view
                continue
            else:
                continue  # not polled yet and nothing known: the next full poll looks at it
            if not causes and _cyclememo.unchanged(last, attempt, status, pushed=pushed):
                views[job_id] = last.view
                continue
            to_observe.append((attempt, submission, status, causes))
        if not keep_leases:
            to_observe = _lease_to_record(context, to_observe, followed)
        for attempt, submission, status, causes in to_observe:
            job_id = attempt.job_id
            observed[job_id] = attempt.state
            try:
                if _observe(context, cluster, rows[job_id], attempt, submission, status, views,
                            trigger=_watch.trigger(context, job_id, causes)):
                    changed = True
            except TransportError as exc:
                # The poll answered but the job's machine did not (its log, progress): nothing
                # of this job was recorded, so the next cycle reads it again.
                context.event(job_id, "transient", f"reading the job's files failed, will retry: {exc}", attempt=attempt.n)
                observed.pop(job_id, None)
                continue
            _cyclememo.remember(context, attempt, status, views[job_id])
            _watch.track(context, watch, attempt, submission, status, causes,
                         stopping=(views[job_id].outcome or "").startswith("stopped"))
    _watch.clean_up(context)
    state_changed = any(views[j].state != s for j, s in observed.items())
    finished = set()
    for job_id in followed:
        if job_id not in (job_ids or []):
            row, latest = store.get_job(job_id), store.latest_attempt(job_id)
            views[job_id] = _view(row.id, row.name, latest, row.outcome)
    for job_id in job_ids or []:
        if job_id in views and job_id not in followed:
            # Ended in this very cycle (a resubmitted job shows RESUBMITTED): no extra cycle to learn it.
            if job_id in observed and views[job_id].state not in ACTIVE_STATES and views[job_id].state != "RESUBMITTED":
                finished.add(job_id)
            continue
        row = store.get_job(job_id)
        latest = store.latest_attempt(job_id)
        # Ended, unless the process observing it is still deciding what follows (a resume).
        observer = store.lease_holder(f"observe:{job_id}")
        pending = bool(store.pending_actions([job_id]))
        if (latest is None or latest.state not in ACTIVE_STATES) and observer in (None, store.owner) and not pending:
            finished.add(job_id)
        views[job_id] = _view(row.id, row.name, latest, row.outcome)
    # A job whose backend cannot be asked any more is over for this watch (it says what to do).
    finished |= unreachable & set(job_ids or [])
    if not keep_leases:
        _release_observed(context)
    return CycleResult(changed, views, finished, followed, state_changed)


def _observed_here(context: RunContext, grouped: dict) -> tuple[dict, set[str]]:
    """The cluster groups without the jobs another process observes (those are only shown).

    Leases are taken in one transaction per cycle, and one this process already holds is
    renewed at half its life, not every cycle: at thousands of followed jobs a commit per
    job per cycle would cost more than the poll."""
    store = context.store
    renew_at = context.scratchpad("runjob-core:observe-renewal")
    now = time.time()
    wanted = [f"observe:{a.job_id}" for group, _ in grouped.values() for a in group]
    held = set(store.held_leases("observe:"))
    due = [key for key in wanted if not (key in held and now < renew_at.get(key, 0.0))]
    others = store.try_leases(due, ttl=OBSERVE_LEASE_SECONDS)
    for key in due:
        if key not in others:
            renew_at[key] = now + OBSERVE_LEASE_SECONDS / 2
    if not others:
        return grouped, set()  # the usual case: the memo's lists, as they were
    return _without(grouped, {key.split(":", 1)[1] for key in others})


def _observed_elsewhere(context: RunContext, grouped: dict) -> tuple[dict, set[str]]:
    """The cluster groups without the jobs another live process observes, read without a
    write: a one-shot cycle takes no lease up front (:func:`_lease_to_record`)."""
    wanted = [f"observe:{a.job_id}" for group, _ in grouped.values() for a in group]
    others = context.store.lease_holders(wanted)
    if not others:
        return grouped, set()
    return _without(grouped, {key.split(":", 1)[1] for key in others})


def _lease_to_record(context: RunContext, to_observe: list, followed: set[str]) -> list:
    """Of the jobs a one-shot cycle is about to observe, those with something to record
    are leased in one transaction (one writer per job); one that another process took
    meanwhile is left to it (shown, not written). A job still queued as the store has it
    records nothing, so it needs no lease."""
    keys = [f"observe:{attempt.job_id}" for attempt, _sub, status, _causes in to_observe if not _still_queued(attempt, status)]
    others = context.store.try_leases(keys, ttl=OBSERVE_LEASE_SECONDS) if keys else {}
    if not others:
        return to_observe
    taken_by_others = {key.split(":", 1)[1] for key in others}
    followed.update(taken_by_others)
    return [item for item in to_observe if item[0].job_id not in taken_by_others]


def _still_queued(attempt: AttemptRow, status: JobStatus) -> bool:
    """The poll says what the store says of a job waiting in the queue: :func:`_observe`
    writes nothing for it."""
    return status.state == PENDING and attempt.state == PENDING and (status.reason or None) == (attempt.reason or None)


def _without(grouped: dict, job_ids: set[str]) -> tuple[dict, set[str]]:
    by_cluster = {}
    for cluster_name, (group, submissions) in grouped.items():
        keep = [(a, s) for a, s in zip(group, submissions) if a.job_id not in job_ids]
        if keep:
            by_cluster[cluster_name] = ([a for a, _ in keep], [s for _, s in keep])
    return by_cluster, job_ids


def _submission(context: RunContext, attempt: AttemptRow) -> Submission:
    # Parsed once per process: the monitor sees the same attempts every cycle.
    cache = context.scratchpad("runjob-core:submissions")
    key = (attempt.job_id, attempt.n, attempt.backend_job_id)
    if key not in cache:
        cache[key] = attempt.submission
    return cache[key]


def _spec(context: RunContext, job_id: str):
    # The spec never changes once submitted (its hash is the job's identity): parse it once.
    cache = context.scratchpad("runjob-core:specs")
    if job_id not in cache:
        cache[job_id] = context.store.get_job(job_id).spec
    return cache[job_id]


def _view(job_id: str, name: str, attempt: AttemptRow | None, outcome: str | None = None) -> JobView:
    if attempt is None:
        return JobView(job_id, name, 0, "NEW", outcome=outcome)
    return JobView(job_id, name, attempt.n, attempt.state, attempt.reason, attempt.started_at, attempt.ended_at,
                   attempt.step, attempt.rows_done, outcome=outcome)


def _observe(context: RunContext, cluster, row: JobHead, attempt: AttemptRow, submission: Submission, status: JobStatus,
             views: dict[str, JobView], trigger: dict | None = None) -> bool:
    store = context.store
    changed = False
    updates: dict = {}
    state_message = None
    if attempt.state == CANCELLING and status.state in ACTIVE_STATES:
        # runjob asked for the cancel: the attempt stays CANCELLING until a poll says how it
        # ended. The backend's words of this poll are kept for the cancel's message.
        context.scratchpad("runjob-core:cancel-polls")[(attempt.job_id, attempt.n)] = status
        status = attrs.evolve(status, state=CANCELLING, reason=attempt.reason)
    if status.state != attempt.state or (status.reason or None) != (attempt.reason or None):
        updates.update(state=status.state, reason=status.reason)
        changed = True
        reason = f" ({status.reason})" if status.reason else ""
        code = f", exit code {status.exit_code}" if _telling_exit_code(status) else ""
        state_message = f"attempt {attempt.n}: {status.state}{reason}{code}"
    # A job still waiting in the queue has no log or progress yet: reading them would
    # cost two remote reads per queued job per cycle for nothing.
    waiting = status.state == PENDING and attempt.state in (PENDING, SUBMITTING)
    if waiting and not updates:
        views[attempt.job_id] = _view(attempt.job_id, row.name, attempt, row.outcome)
        return False
    if status.state == RUNNING and attempt.started_at is None:
        updates["started_at"] = status.started_at or time.time()
    if status.terminal:
        updates["ended_at"] = status.ended_at or time.time()
        updates["exit_code"] = status.exit_code
        if attempt.started_at is None and status.started_at:
            updates["started_at"] = status.started_at
    transport = context.transport(cluster, submission.machine)
    progress = None if waiting else _read_progress(transport, submission)
    if progress:
        for key in ("step", "rows_done"):
            if isinstance(progress.get(key), int) and progress[key] != getattr(attempt, key):
                updates[key] = progress[key]
                changed = True
    window, offset = ("", None) if waiting else _new_log_text(context, transport, attempt, submission, final=status.terminal)
    if window:
        changed = True
        if not (progress and isinstance(progress.get("step"), int)):
            updates.update(_log_progress.updates(attempt, window))  # a plain Trainer script's bar
    if progress or window:
        metrics_history.observe(context, transport, attempt, submission, progress, window)
    if not waiting:  # GPU telemetry beside the log, at most once per sample interval (runjob_core.gpu.telemetry)
        gpu_telemetry.observe(context, transport, _spec(context, attempt.job_id), attempt, submission, status)
    findings: list[Finding] = []
    if window or changed or status.terminal or status.state == RUNNING:
        caller = context.hook("runjob_check_health", cluster.type)
        kwargs = {"job": _spec(context, attempt.job_id), "submission": submission, "status": status, "window": window,
                  "progress": progress, "cluster": cluster, "context": context}
        # A checker that breaks is named once per attempt; monitoring and the other checkers go on.
        findings = plugins.flatten(plugins.call_each(caller, kwargs, on_error=_health_failed(context, attempt)))
    # What this cycle learnt lands in one transaction: a full disk mid-way records none of it,
    # and the log offset stays put, so the next cycle reads the same lines again (nothing lost).
    with store.transaction():
        _record_state(context, attempt, status, state_message, updates, trigger)
        if status.terminal and "state" in updates:
            store.mark_pending(attempt.job_id, attempt.n)  # done below; redone if this process dies first
        if offset is not None:
            store.set_offset(attempt.job_id, attempt.n, offset)
        for finding in findings:
            where = f" (log line {finding.line})" if finding.line else ""
            context.event(attempt.job_id, "finding", f"{finding.label}: {finding.message}{where}", attempt=attempt.n,
                          source=finding.source, label=finding.label, severity=finding.severity, action=finding.action,
                          line=finding.line, text=finding.text, **(trigger or {}))
    view = _view(attempt.job_id, row.name, store.attempt(attempt.job_id, attempt.n))
    view.total = progress.get("total") if progress else None
    views[attempt.job_id] = view
    view.findings.extend(finding.label for finding in findings)
    _apply_actions(context, attempt, submission, status, findings, view)
    if status.terminal:
        store.clear_pending(attempt.job_id, attempt.n)
    return changed or bool(findings)


def _finish_pending(context: RunContext, job_ids: list[str] | None) -> bool:
    """Follow-ups (resume, retry, outcome) of attempts whose end was recorded by a monitor
    that died before acting on it: done now, from what the store kept of that cycle."""
    store = context.store
    done = False
    for job_id, n in store.pending_actions(job_ids):
        if store.try_lease(f"observe:{job_id}", ttl=OBSERVE_LEASE_SECONDS) is not None:
            continue  # another monitor follows this job: it does it
        latest = store.latest_attempt(job_id)
        if latest is not None and latest.n == n and latest.submission_json:
            status = JobStatus(state=latest.state, source="runjob-store", exit_code=latest.exit_code, reason=latest.reason)
            findings = [Finding(label=e.data.get("label", ""), severity=e.data.get("severity", "info"), message=e.message,
                                action=e.data.get("action", "continue"), source=e.source, line=e.data.get("line"),
                                text=e.data.get("text"))
                        for e in store.events(job_id, kinds=("finding",)) if e.attempt == n]
            row = store.job_heads([job_id])[job_id]
            _apply_actions(context, latest, _submission(context, latest), status, findings, _view(job_id, row.name, latest))
            done = True
        store.clear_pending(job_id, n)
    return done


def _record_state(context: RunContext, attempt: AttemptRow, status: JobStatus, message: str | None, updates: dict,
                  trigger: dict | None = None) -> None:
    with context.store.transaction():
        if message:
            context.event(attempt.job_id, "state", message, attempt=attempt.n, source=status.source, state=status.state,
                          **(trigger or {}))
        if updates:
            context.store.update_attempt(attempt.job_id, attempt.n, **updates)


def _health_failed(context: RunContext, attempt: AttemptRow):
    reported = context.scratchpad("runjob-core:health-errors")

    def failed(plugin: str, exc: BaseException) -> None:
        key = (attempt.job_id, attempt.n, plugin)
        if key not in reported:
            reported[key] = True
            _plugin_errors.record(context, attempt.job_id, "runjob_check_health", plugin, exc, attempt=attempt.n)
    return failed


def _telling_exit_code(status: JobStatus) -> bool:
    # SLURM records 0 for a job it ended itself (OUT_OF_MEMORY is 0:125, TIMEOUT 0:0):
    # "exit code 0" beside those would read as success.
    if not status.terminal or status.exit_code is None:
        return False
    return status.exit_code != 0 or status.state in (COMPLETED, FAILED)


def _read_progress(transport, submission: Submission) -> dict | None:
    text = transport.read_text(submission.progress_path)
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None  # written atomically by the job; a bad file is someone else's
    return data if isinstance(data, dict) else None


def _new_log_text(context: RunContext, transport, attempt: AttemptRow, submission: Submission, *,
                  final: bool) -> tuple[str, int | None]:
    """The new complete log lines and the offset after them (recorded by the caller)."""
    store = context.store
    offset = store.offset(attempt.job_id, attempt.n)
    data = transport.read_from(submission.log_path, offset, MAX_WINDOW_BYTES)
    if not data:
        return "", None
    if not final or len(data) == MAX_WINDOW_BYTES:
        # '\r' ends a line too: a progress bar redraws one line for hours without a '\n'.
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if cut == -1:
            if len(data) < MAX_WINDOW_BYTES:
                return "", None  # a partial line: wait for the rest
            # One line longer than the window: the checks get it in window-sized pieces, each
            # ended as a line (their memory stays bounded), and the offset moves on.
            return data.decode("utf-8", "replace") + "\n", offset + len(data)
        data = data[: cut + 1]
    return data.decode("utf-8", "replace"), offset + len(data)


def _apply_actions(context: RunContext, attempt: AttemptRow, submission: Submission, status: JobStatus,
                   findings: list[Finding], view: JobView) -> None:
    store = context.store
    stops = [f for f in findings if f.action == "stop"]
    if not stops and not status.terminal:
        return
    row = store.get_job(attempt.job_id)
    # This attempt was stopped by runjob already: its final state is the scheduler's to
    # tell (the monitor polls it), and nothing more is done about it.
    stopped = any(e.attempt == attempt.n for e in store.events(attempt.job_id, kinds=("stopping",)))
    if stops and status.state in ACTIVE_STATES:
        if not stopped:
            first = stops[0]
            lifecycle.stop(context, row, reason=f"stopped by health check {first.label}")
            store.set_job(row.id, outcome=f"stopped: {first.label}: {first.message}")
            view.outcome = f"stopped: {first.label}"
        return
    if stops and not stopped:
        store.set_job(row.id, outcome=f"failed: {stops[0].label}: {stops[0].message}")
    if not status.terminal:
        return
    # A machine rented for this attempt goes back now, its files copied home first.
    harvest.settle(context, row, attempt.n, ended=status.state)
    if stopped:
        lifecycle.release_attempt(context, row, store.attempt(row.id, attempt.n), reason=f"stopped, ended {status.state}")
        return
    if status.state == COMPLETED:
        store.set_job(row.id, outcome="completed")
        return  # a machine of its own was given back above, its files copied home
    try:
        _after_early_end(context, row, attempt, status, findings, stops, view)
    finally:
        # The attempt is over and will not be collected: give its machine back.
        why = "cancelled" if status.state == CANCELLED else f"ended {status.state}"
        lifecycle.release_attempt(context, row, store.attempt(row.id, attempt.n), reason=why)


def _after_early_end(context: RunContext, row, attempt: AttemptRow, status: JobStatus, findings: list[Finding],
                     stops: list[Finding], view: JobView) -> None:
    if (status.state in RESUMABLE_STATES or _resumable_loss(status)) and not stops:
        _maybe_resume(context, row, attempt, status, view)
    elif status.state == FAILED and not stops and any(f.action == "retry" for f in findings):
        _maybe_retry(context, row, attempt, status, findings, view)
    elif status.state == FAILED and status.exit_code == RESUME_EXIT_CODE and not stops:
        # The job saved on the time-limit warning and asked to be resumed.
        _maybe_resume(context, row, attempt, attrs.evolve(status, state=TIMEOUT, reason="stopped early to resume"), view)


def _resumable_loss(status: JobStatus) -> bool:
    # A machine lost with its work recoverable (a reclaimed spot pod): the backend says so.
    return status.state == LOST and bool(status.resumable)


def _maybe_resume(context: RunContext, row, attempt: AttemptRow, status: JobStatus, view: JobView) -> None:
    job = row.spec
    policy = job.resume
    attempts = context.store.attempts(row.id)
    if not policy.auto:
        context.event(row.id, "resume_skipped", f"{status.state}: automatic resume is off (resume.auto: false); run: runjob resume {row.id}",
                      attempt=attempt.n)
        return
    budget_key = RESUMABLE_STATES.get(status.state, "max_preemptions")
    budget_states = {k for k, v in RESUMABLE_STATES.items() if v == budget_key} | ({LOST} if budget_key == "max_preemptions" else set())
    used = sum(1 for a in attempts if a.state in budget_states)
    if len(attempts) >= policy.max_attempts or used > getattr(policy, budget_key):
        # Name the budget that actually ran out: the attempts in all, or this kind of ending.
        spent = "max_attempts" if len(attempts) >= policy.max_attempts else budget_key
        message = f"{status.state}: not resuming, the budget is spent ({len(attempts)} attempts; resume.{spent}={getattr(policy, spent)})"
        context.store.set_job(row.id, outcome=message)
        context.event(row.id, "resume_refused", message, attempt=attempt.n)
        return
    latest = context.store.attempt(row.id, attempt.n)
    if not _progressed(attempts, latest):
        message = (f"{status.state}: not resuming, no progress in attempt {attempt.n} nor the one before "
                   "(step and rows_done unchanged); fix the job so it checkpoints or writes results")
        cause = _checkpoint_cause.explain(context, latest.submission)
        if cause:
            message += f". The cause: {cause}"
        context.store.set_job(row.id, outcome=message)
        context.event(row.id, "resume_refused", message, attempt=attempt.n)
        return
    try:
        plan = _plugin_errors.call_first(context, context.hook("runjob_resume", row.backend),
                                         {"job": job, "submission": latest.submission, "status": status,
                                          "cluster": lifecycle.job_cluster(context, row), "context": context},
                                         hook="runjob_resume", blame=row.backend, job_id=row.id, attempt=attempt.n)
    except _plugin_errors.PluginError as exc:
        context.event(row.id, "resume_failed", str(exc), attempt=attempt.n, quiet=True)
        return
    if plan is None:
        context.event(row.id, "resume_refused", f"{status.state}: the backend cannot resume this job", attempt=attempt.n)
        return
    at = f" at step {latest.step}" if latest.step is not None else (f" after {latest.rows_done} rows" if latest.rows_done else "")
    what = {TIMEOUT: "timed out", PREEMPTED: "was preempted", NODE_FAIL: "lost its node", LOST: "lost its machine"}[status.state]
    if status.exit_code == RESUME_EXIT_CODE:
        what = "saved on the time-limit warning"  # exit 75: nothing was lost, unlike a timeout
    source = f"checkpoint {plan.checkpoint}" if plan.checkpoint else "its results so far"
    context.event(row.id, "resuming", f"Job {what}{at}. Resuming from {source}. ({plan.reason})", attempt=attempt.n, source=plan.source,
                  resume_step=plan.step)  # the report's steps lost per resume
    try:
        lifecycle.resubmit(context, row, resume_from=plan.checkpoint, resume_env=dict(plan.env), after=attempt.n)
    except RunjobError as exc:
        context.event(row.id, "resume_failed", f"resubmission failed: {exc}", attempt=attempt.n)
        return
    view.state = "RESUBMITTED"


def _crash_signature(context: RunContext, job_id: str, n: int) -> set[str]:
    """The error lines of an attempt's findings: the same set twice means a deterministic crash."""
    events = context.store.events(job_id, kinds=("finding",))
    return {e.data.get("text") or e.message for e in events if e.attempt == n and e.data.get("severity") == "error"}


def _maybe_retry(context: RunContext, row, attempt: AttemptRow, status: JobStatus, findings: list[Finding],
                 view: JobView) -> None:
    """A transient failure (NCCL timeout, a dropped filesystem): resubmit from the checkpoint,
    within ``resume.max_failures``, unless it crashed the same way as the attempt before."""
    policy = row.spec.resume
    attempts = context.store.attempts(row.id)
    failures = sum(1 for a in attempts if a.state == FAILED)
    labels = ", ".join(sorted({f.label for f in findings if f.action == "retry"}))
    if not policy.auto or failures > policy.max_failures or len(attempts) >= policy.max_attempts:
        message = f"FAILED ({labels}): not retrying, resume.max_failures={policy.max_failures} is spent"
        context.store.set_job(row.id, outcome=message)
        context.event(row.id, "resume_refused", message, attempt=attempt.n)
        return
    if attempt.n > 1 and _crash_signature(context, row.id, attempt.n) == _crash_signature(context, row.id, attempt.n - 1):
        message = f"FAILED ({labels}) with the same error as attempt {attempt.n - 1}: a deterministic crash, not retrying"
        context.store.set_job(row.id, outcome=message)
        context.event(row.id, "resume_refused", message, attempt=attempt.n)
        return
    latest = context.store.attempt(row.id, attempt.n)
    plan = context.hook("runjob_resume", row.backend)(job=row.spec, submission=_submission(context, latest), status=status,
                                                      cluster=lifecycle.job_cluster(context, row), context=context)
    # A backend that cannot resume (None) still gets the retry, from the job's start: the
    # failure was transient, not the checkpoint's.
    checkpoint = plan.checkpoint if plan is not None else None
    context.event(row.id, "resuming", f"Job failed with a transient error ({labels}). Retrying from "
                  f"{checkpoint or 'its results so far'}.", attempt=attempt.n)
    try:
        lifecycle.resubmit(context, row, resume_from=checkpoint, resume_env=dict(plan.env) if plan is not None else {},
                           after=attempt.n)
    except RunjobError as exc:
        context.event(row.id, "resume_failed", f"resubmission failed: {exc}", attempt=attempt.n)
        return
    view.state = "RESUBMITTED"


def _progressed(attempts: list[AttemptRow], latest: AttemptRow) -> bool:
    """False once two attempts in a row made no progress (step and rows_done unchanged).

    One attempt without progress may be bad luck (preempted right after starting); two
    in a row is a loop that would never end.
    """
    best, streak = (0, 0), 0
    for attempt in [a for a in attempts if a.n < latest.n] + [latest]:
        mark = (attempt.step or 0, attempt.rows_done or 0)
        if mark > best:
            best, streak = mark, 0
        else:
            streak += 1
    return streak < 2


def watch(context: RunContext, job_ids: list[str], *, once: bool = False, min_interval: float = 0.5,
          max_interval: float = 30.0, on_cycle: Callable[[CycleResult], None] | None = None) -> CycleResult:
    """Cycle until every job in *job_ids* has ended (resumes included).

    Between full polls the monitor sleeps in :func:`_watch.wait_for_wakeup`: the push path
    wakes it for the jobs whose markers or logs changed. While a watcher is alive the full
    poll backs off to *max_interval* unless a state changed; without one, it backs off
    only while nothing changed, as it always did. A full store (disk) or an unreachable one
    (a PostgreSQL state's server restarting, a network cut) is a pause, not an end: the cycle
    runs again after a wait that doubles up to *max_interval*.
    """
    interval = min_interval
    pause = min_interval
    woken: dict[str, set[str]] | None = None
    next_full = 0.0
    if not once:
        _watch.enable(context)
    try:
        while True:
            full = woken is None
            try:
                result = cycle(context, job_ids, woken=woken, keep_leases=True)
            except StoreTransientError as exc:
                # Transient: the cycle's writes were rolled back whole; the same cycle runs again.
                pause = min(max(pause * 2, 1.0), max_interval)
                _warn(context, f"{exc}; retrying in {pause:.0f} s")
                time.sleep(pause)
                woken = None
                continue
            pause = min_interval
            if on_cycle is not None:
                on_cycle(result)
            if once or (job_ids and result.finished >= set(job_ids)):
                return result
            if not job_ids and not context.store.active_attempts():
                return result
            if full:
                busy = result.state_changed if _watch.all_alive(context) else result.changed
                interval = _watch.full_poll_interval(context, interval, min_interval, max_interval, busy=busy)
                if result.followed:
                    interval = min(interval, FOLLOW_INTERVAL)
                next_full = time.monotonic() + interval
            elif _watch.all_alive(context):
                # A wake-up poll asked the scheduler about every job of the cluster: it counts
                # as the safety net's poll too.
                next_full = max(next_full, _watch.last_poll(context) + interval)
            woken = _watch.wait_for_wakeup(context, next_full - time.monotonic()) or None
    finally:
        _watch.close(context)
        _release_observed(context)


def _release_observed(context: RunContext) -> None:
    """Done with these jobs: another monitor may take them over at once."""
    keys = context.store.held_leases("observe:")
    if not keys:
        return
    try:
        context.store.release_leases(keys)
    except StoreError:
        pass  # a full or read-only store: the leases free themselves when this process ends
    context.scratchpad("runjob-core:observe-renewal").clear()


def _warn(context: RunContext, message: str) -> None:
    """A warning that cannot go to the store (it is full): straight to the user."""
    import sys

    print(f"warning: {message}", file=sys.stderr, flush=True)
