"""Observing one attempt in a cycle: its new status, progress, log lines, metrics, GPU
telemetry and health findings, recorded in one transaction; then what its findings or its
end call for (:mod:`runjob_core.monitor.endings`)."""

from __future__ import annotations

import json
import time

import attrs

from runjob_core import _plugin_errors, plugins
from runjob_core.gpu import telemetry as gpu_telemetry
from runjob_core.models import ACTIVE_STATES, CANCELLING, COMPLETED, FAILED, PENDING, RUNNING, SUBMITTING, Finding, JobStatus, Submission
from runjob_core.monitor import endings
from runjob_core.monitor import log_progress as _log_progress
from runjob_core.monitor.state import MonitorState
from runjob_core.monitor.views import JobView, view_of
from runjob_core.reporting import history as metrics_history
from runjob_core.store import AttemptRow, JobHead

#: Read at most this much new log per job per cycle; the rest comes next cycle.
MAX_WINDOW_BYTES = 8 << 20


def observe(monitor: MonitorState, cluster, row: JobHead, attempt: AttemptRow, submission: Submission, status: JobStatus,
            views: dict[str, JobView], trigger: dict | None = None) -> bool:
    """Record what changed of *attempt* since the last look and act on it; the job's view
    goes into *views*. True when something was recorded."""
    context = monitor.context
    store = context.store
    changed = False
    updates: dict = {}
    state_message = None
    if attempt.state == CANCELLING and status.state in ACTIVE_STATES:
        # runjob asked for the cancel: the attempt stays CANCELLING until a poll says how it
        # ended. The backend's words of this poll are kept for the cancel's message.
        monitor.cancel_polls[(attempt.job_id, attempt.n)] = status
        status = attrs.evolve(status, state=CANCELLING, reason=attempt.reason)
    if status.state != attempt.state or (status.reason or None) != (attempt.reason or None):
        updates.update(state=status.state, reason=status.reason)
        changed = True
        reason = f" ({status.reason})" if status.reason else ""
        code = f", exit code {status.exit_code}" if telling_exit_code(status) else ""
        state_message = f"attempt {attempt.n}: {status.state}{reason}{code}"
    # A job still waiting in the queue has no log or progress yet: reading them would
    # cost two remote reads per queued job per cycle for nothing.
    waiting = status.state == PENDING and attempt.state in (PENDING, SUBMITTING)
    if waiting and not updates:
        views[attempt.job_id] = view_of(attempt.job_id, row.name, attempt, row.outcome)
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
    window, offset, read_before = ("", None, 0) if waiting else _new_log_text(store, transport, attempt, submission,
                                                                              final=status.terminal)
    if status.state == RUNNING and not window and not read_before:
        _say_if_never_started(context, attempt, status, updates)
    if window:
        changed = True
        if not (progress and isinstance(progress.get("step"), int)):
            updates.update(_log_progress.updates(attempt, window))  # a plain Trainer script's bar
    if progress or window:
        metrics_history.observe(monitor.history, store, transport, attempt, submission, progress, window)
    if not waiting:  # GPU telemetry beside the log, at most once per sample interval (runjob_core.gpu.telemetry)
        gpu_telemetry.observe(context, transport, monitor.spec(attempt.job_id), attempt, submission, status)
    findings: list[Finding] = []
    if window or changed or status.terminal or status.state == RUNNING:
        caller = context.hook("runjob_check_health", cluster.type)
        kwargs = {"job": monitor.spec(attempt.job_id), "submission": submission, "status": status, "window": window,
                  "progress": progress, "cluster": cluster, "context": context}
        # A checker that breaks is named once per attempt; monitoring and the other checkers go on.
        findings = plugins.flatten(plugins.call_each(caller, kwargs, on_error=_health_failed(monitor, attempt)))
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
    view = view_of(attempt.job_id, row.name, store.attempt(attempt.job_id, attempt.n))
    view.total = progress.get("total") if progress else None
    views[attempt.job_id] = view
    view.findings.extend(finding.label for finding in findings)
    endings.apply_actions(monitor, attempt, submission, status, findings, view)
    if status.terminal:
        store.clear_pending(attempt.job_id, attempt.n)
    return changed or bool(findings)


def telling_exit_code(status: JobStatus) -> bool:
    # SLURM records 0 for a job it ended itself (OUT_OF_MEMORY is 0:125, TIMEOUT 0:0):
    # "exit code 0" beside those would read as success.
    if not status.terminal or status.exit_code is None:
        return False
    return status.exit_code != 0 or status.state in (COMPLETED, FAILED)


#: The scheduler has shown a job RUNNING this long and its log has not one line: every runjob
#: job script writes its start line first, so the node most likely never started it.
NEVER_STARTED_SECONDS = 300.0


def _say_if_never_started(context, attempt: AttemptRow, status: JobStatus, updates: dict) -> None:
    """One event per attempt for a job the scheduler says runs but that never wrote its log.
    Seen with SLURM 22.05: slurmctld restarted between allocating a job and sending its launch
    recovers it as RUNNING, the node never starts it, and it stays so until its time limit
    (forever with none). runjob cannot tell that from a job whose node writes its log late, so
    it says what it sees and how to check; it cancels nothing."""
    since = attempt.started_at or updates.get("started_at")
    if not since or time.time() - since < NEVER_STARTED_SECONDS:
        return
    store = context.store
    if any(e.attempt == attempt.n for e in store.events(attempt.job_id, kinds=("never_started",))):
        return
    node = f" on {status.node}" if status.node else ""
    context.event(attempt.job_id, "never_started",
                  f"attempt {attempt.n}: the scheduler has shown it RUNNING{node} for {(time.time() - since) / 60:.0f} min, "
                  "but its log has not one line (a runjob job writes its start line first): the node may never have "
                  "started it (SLURM does so when slurmctld restarts between allocating a job and launching it). "
                  f"Check the scheduler's record of it; if it never ran: runjob cancel {attempt.job_id} && "
                  f"runjob resume {attempt.job_id}", attempt=attempt.n, node=status.node)


def _read_progress(transport, submission: Submission) -> dict | None:
    text = transport.read_text(submission.progress_path)
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None  # written atomically by the job; a bad file is someone else's
    return data if isinstance(data, dict) else None


def _new_log_text(store, transport, attempt: AttemptRow, submission: Submission, *,
                  final: bool) -> tuple[str, int | None, int]:
    """The new complete log lines, the offset after them (recorded by the caller), and how
    much of the log earlier cycles had read."""
    offset = store.offset(attempt.job_id, attempt.n)
    data = transport.read_from(submission.log_path, offset, MAX_WINDOW_BYTES)
    if not data:
        return "", None, offset
    if not final or len(data) == MAX_WINDOW_BYTES:
        # '\r' ends a line too: a progress bar redraws one line for hours without a '\n'.
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if cut == -1:
            if len(data) < MAX_WINDOW_BYTES:
                return "", None, offset  # a partial line: wait for the rest
            # One line longer than the window: the checks get it in window-sized pieces, each
            # ended as a line (their memory stays bounded), and the offset moves on.
            return data.decode("utf-8", "replace") + "\n", offset + len(data), offset
        data = data[: cut + 1]
    return data.decode("utf-8", "replace"), offset + len(data), offset


def _record_state(context, attempt: AttemptRow, status: JobStatus, message: str | None, updates: dict,
                  trigger: dict | None = None) -> None:
    with context.store.transaction():
        if message:
            context.event(attempt.job_id, "state", message, attempt=attempt.n, source=status.source, state=status.state,
                          **(trigger or {}))
        if updates:
            context.store.update_attempt(attempt.job_id, attempt.n, **updates)


def _health_failed(monitor: MonitorState, attempt: AttemptRow):
    reported = monitor.health_errors

    def failed(plugin: str, exc: BaseException) -> None:
        key = (attempt.job_id, attempt.n, plugin)
        if key not in reported:
            reported.add(key)
            _plugin_errors.record(monitor.context, attempt.job_id, "runjob_check_health", plugin, exc, attempt=attempt.n)
    return failed
