"""What an attempt's findings or its end call for: a stop, its outcome, an automatic resume
(timeout, preemption, a lost node or spot machine) or retry (a transient failure), and its
machine given back; and the follow-ups a monitor that died left undone."""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

import attrs

from runjob_core import _plugin_errors, lifecycle
from runjob_core.collecting import harvest
from runjob_core.errors import RunjobError
from runjob_core.models import ACTIVE_STATES, CANCELLED, COMPLETED, FAILED, LOST, NODE_FAIL, PREEMPTED, TIMEOUT, Finding, JobStatus, Submission
from runjob_core.monitor import checkpoint_cause as _checkpoint_cause
from runjob_core.monitor.state import MonitorState
from runjob_core.monitor.views import JobView, view_of
from runjob_core.store import AttemptRow

if TYPE_CHECKING:
    from runjob_core.context import RunContext

#: runjob_core.job.RESUME_EXIT_CODE: the job stopped early on purpose and wants resuming.
RESUME_EXIT_CODE = 75
#: The endings resumed automatically, each with the budget (``resume.<key>``) it spends.
RESUMABLE_STATES = MappingProxyType({TIMEOUT: "max_timeouts", PREEMPTED: "max_preemptions", NODE_FAIL: "max_preemptions"})


def finish_pending(monitor: MonitorState, job_ids: list[str] | None) -> bool:
    """Follow-ups (resume, retry, outcome) of attempts whose end was recorded by a monitor
    that died before acting on it: done now, from what the store kept of that cycle."""
    store = monitor.context.store
    done = False
    for job_id, n in store.pending_actions(job_ids):
        if not monitor.leases.take(job_id):
            continue  # another monitor follows this job: it does it
        latest = store.latest_attempt(job_id)
        if latest is not None and latest.n == n and latest.submission_json:
            status = JobStatus(state=latest.state, source="runjob-store", exit_code=latest.exit_code, reason=latest.reason)
            findings = _recorded_findings(store, job_id, n)
            row = store.job_heads([job_id])[job_id]
            apply_actions(monitor, latest, monitor.submission(latest), status, findings, view_of(job_id, row.name, latest))
            done = True
        store.clear_pending(job_id, n)
    return done


def apply_actions(monitor: MonitorState, attempt: AttemptRow, submission: Submission, status: JobStatus,
                  findings: list[Finding], view: JobView) -> None:
    """Stop a job a finding says to stop; once an attempt ended: its outcome, a resume or a
    retry, and its machine given back."""
    context = monitor.context
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
        _after_early_end(monitor, row, attempt, status, findings, stops, view)
    finally:
        # The attempt is over and will not be collected: give its machine back.
        why = "cancelled" if status.state == CANCELLED else f"ended {status.state}"
        lifecycle.release_attempt(context, row, store.attempt(row.id, attempt.n), reason=why)


def _after_early_end(monitor: MonitorState, row, attempt: AttemptRow, status: JobStatus, findings: list[Finding],
                     stops: list[Finding], view: JobView) -> None:
    if (status.state in RESUMABLE_STATES or _resumable_loss(status)) and not stops:
        _maybe_resume(monitor.context, row, attempt, status, view)
    elif status.state == FAILED and not stops and (retries := _retry_findings(monitor.context, attempt, findings)):
        maybe_retry(monitor, row, attempt, status, retries, view)
    elif status.state == FAILED and status.exit_code == RESUME_EXIT_CODE and not stops:
        # The job saved on the time-limit warning and asked to be resumed.
        _maybe_resume(monitor.context, row, attempt, attrs.evolve(status, state=TIMEOUT, reason="stopped early to resume"), view)


def _retry_findings(context: RunContext, attempt: AttemptRow, findings: list[Finding]) -> list[Finding]:
    """The attempt's findings that ask for a retry: this cycle's, and those a cycle recorded while
    it still ran. A kill's "Killed" line and exit code 137 reach the log a moment before the
    scheduler reports the end (the script's own epilogue runs first): a cycle in that moment
    records the finding when nothing is to be done yet, and the ending cycle does not report
    the same label again."""
    retries = [f for f in findings if f.action == "retry"]
    labels = {f.label for f in retries}
    for finding in _recorded_findings(context.store, attempt.job_id, attempt.n):
        if finding.action == "retry" and finding.label not in labels:
            labels.add(finding.label)
            retries.append(finding)
    return retries


def _recorded_findings(store, job_id: str, n: int) -> list[Finding]:
    """The findings recorded for attempt *n* of *job_id*, as the health checks made them."""
    return [Finding(label=e.data.get("label", ""), severity=e.data.get("severity", "info"), message=e.message,
                    action=e.data.get("action", "continue"), source=e.source, line=e.data.get("line"), text=e.data.get("text"))
            for e in store.events(job_id, kinds=("finding",)) if e.attempt == n]


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


def maybe_retry(monitor: MonitorState, row, attempt: AttemptRow, status: JobStatus, findings: list[Finding],
                view: JobView) -> None:
    """A transient failure (NCCL timeout, a dropped filesystem): resubmit from the checkpoint,
    within ``resume.max_failures``, unless it crashed the same way as the attempt before."""
    context = monitor.context
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
    plan = context.hook("runjob_resume", row.backend)(job=row.spec, submission=monitor.submission(latest), status=status,
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
