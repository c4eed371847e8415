"""Cancel, confirmed in the backend's world; and forget, for what runjob can no longer reach.

A backend's ``runjob_cancel`` answering "done" proves nothing: a cancel that kills nothing
would be recorded CANCELLED while the job (and its GPU bill) runs on unseen, since nothing
polls a terminal attempt again. So a cancel only *asks*: the attempt becomes
``CANCELLING`` (still active, still polled) and is followed with the monitor's own cycle
until a poll says how it really ended: ``CANCELLED``, or the state it had reached before
the cancel arrived (a late cancel of a job the scheduler had completed keeps
``COMPLETED``). A cancel not confirmed within the bound is an error naming the backend's
last words and the ways out; the attempt stays ``CANCELLING`` and every later ``runjob
status`` or ``watch`` keeps polling it.

``forget`` is the way out for a job whose backend cannot be asked (uninstalled, broken,
the cluster gone): the attempt becomes ``FORGOTTEN``, recorded as *not stopped*.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from runjob_core import _plugin_errors
from runjob_core.errors import RunjobError
from runjob_core.models import ACTIVE_STATES, CANCELLED, CANCELLING, FORGOTTEN

if TYPE_CHECKING:
    from runjob_core.context import RunContext
    from runjob_core.store import JobRow

#: Seconds a cancel waits for a poll to confirm it (the local and RunPod backends give a
#: job 10 s between TERM and KILL; a scheduler takes a few seconds to record it).
CONFIRM_SECONDS = 60.0


class CancelNotConfirmedError(RunjobError):
    """The backend accepted a cancel, but no poll has confirmed the job ended."""


def cancel(context: RunContext, row: JobRow, *, reason: str, wait: float = CONFIRM_SECONDS,
           force: bool = False) -> list[str]:
    """Ask the backend to cancel the job's active attempts, then follow them until a poll
    confirms each ended (see the module docstring). Returns the backend ids asked.

    :raises CancelNotConfirmedError: an attempt still runs after *wait* seconds (unless
        *force*: it is then forgotten, which stops nothing).
    """
    attempts = [a for a in context.store.attempts(row.id) if a.state in ACTIVE_STATES and a.submission_json]
    unsent = [a for a in context.store.attempts(row.id) if a.state in ACTIVE_STATES and not a.submission_json]
    if not attempts:
        if force and unsent:
            forget(context, row, why="cancel --force of an attempt that was never recorded as submitted")
        return []
    try:
        asked = ask(context, row, attempts)
    except RunjobError as exc:
        if not force:
            raise
        forget(context, row, why=f"cancel --force after the backend failed to cancel: {exc}")
        return []
    for attempt in attempts:
        if attempt.backend_job_id in asked and attempt.state != CANCELLING:
            context.store.update_attempt(row.id, attempt.n, state=CANCELLING, reason=reason)
            context.event(row.id, "cancelling", f"attempt {attempt.n} ({attempt.backend_job_id}): {reason}; asked "
                          f"{row.backend} to stop it, waiting for it to end", attempt=attempt.n)
    still = _follow(context, row, [a.n for a in attempts if a.backend_job_id in asked], wait=wait)
    _record_endings(context, row, [a.n for a in attempts if a.backend_job_id in asked], reason)
    refused = [a for a in attempts if a.backend_job_id not in asked]
    problems = [f"attempt {a.n} ({a.backend_job_id}): {row.backend} did not cancel it" for a in refused]
    problems += [_unconfirmed(context, row, a, wait) for a in still]
    if problems and force:
        forget(context, row, why="cancel --force: " + "; ".join(problems))
    elif problems:
        raise CancelNotConfirmedError("; ".join(problems) + f". runjob keeps following it (runjob status {row.id}); check it "
                                      f"on {row.cluster} and run `runjob cancel {row.id}` again, or `runjob cancel --force "
                                      f"{row.id}` to stop following it (that does NOT stop the job)")
    return sorted(asked)


def ask(context: RunContext, row: JobRow, attempts: list) -> set[str]:
    """``runjob_cancel`` for *attempts*; a plugin bug is a :class:`PluginError` (one line)."""
    from runjob_core.lifecycle import job_cluster

    cluster = job_cluster(context, row)
    caller = context.hook("runjob_cancel", cluster.type)
    kwargs = {"submissions": [a.submission for a in attempts], "cluster": cluster, "context": context}
    done = _plugin_errors.call_first(context, caller, kwargs, hook="runjob_cancel", blame=cluster.type, job_id=row.id,
                                     attempt=attempts[-1].n)
    return set(done or [])


def _follow(context: RunContext, row: JobRow, numbers: list[int], *, wait: float) -> list:
    """Cycle the monitor on the job until the attempts *numbers* ended or *wait* passed;
    the attempts still active then."""
    from runjob_core import monitor

    interval = min(1.0, max(0.2, context.backend_info(row.backend).poll_interval))
    deadline = time.monotonic() + wait
    while True:
        still = [a for a in context.store.attempts(row.id) if a.n in numbers and a.state in ACTIVE_STATES]
        if not still or time.monotonic() >= deadline:
            return still
        monitor.cycle(context, [row.id])
        if any(a.state in ACTIVE_STATES for a in context.store.attempts(row.id) if a.n in numbers):
            time.sleep(interval)


def _record_endings(context: RunContext, row: JobRow, numbers: list[int], reason: str) -> None:
    for attempt in context.store.attempts(row.id):
        if attempt.n not in numbers or attempt.state in ACTIVE_STATES:
            continue
        if any(e.attempt == attempt.n for e in context.store.events(row.id, kinds=("cancelled", "cancel_late"))):
            continue  # another process recorded it
        if attempt.state == CANCELLED:
            context.event(row.id, "cancelled", f"attempt {attempt.n} ({attempt.backend_job_id}): {reason}; "
                          f"{row.backend} confirms it ended", attempt=attempt.n)
            context.store.set_job(row.id, outcome=reason)
        else:
            # The scheduler's word wins: the job had ended on its own before the cancel took.
            context.event(row.id, "cancel_late", f"attempt {attempt.n} ({attempt.backend_job_id}) had already ended "
                          f"{attempt.state} when the cancel arrived; its own ending is kept", attempt=attempt.n)


def _unconfirmed(context: RunContext, row: JobRow, attempt, wait: float) -> str:
    from runjob_core.monitor import Monitor

    said = Monitor.of(context).cancel_polls.get((row.id, attempt.n))
    words = f"{said.state}" + (f": {said.reason}" if said and said.reason else "") if said else "no answer from the poll"
    message = (f"attempt {attempt.n} ({attempt.backend_job_id}) has not ended {wait:.0f} s after {row.backend} was asked "
               f"to cancel it ({row.backend} says {words})")
    context.event(row.id, "cancel_unconfirmed", message, attempt=attempt.n, quiet=True)  # the error says it
    return message


def forget(context: RunContext, row: JobRow, *, why: str = "forgotten by the user") -> list[int]:
    """Stop following the job's active attempts without asking the backend anything.
    Returns the attempt numbers forgotten."""
    store = context.store
    forgotten = []
    for attempt in store.attempts(row.id):
        if attempt.state not in ACTIVE_STATES:
            continue
        where = f"{row.backend} job {attempt.backend_job_id}" if attempt.backend_job_id else "its submission"
        message = (f"attempt {attempt.n} forgotten ({why}): runjob no longer follows it and did NOT stop it; "
                   f"check {where} on {row.cluster} yourself")
        with store.transaction():
            store.update_attempt(row.id, attempt.n, state=FORGOTTEN, ended_at=time.time(), reason="forgotten: not stopped")
            store.clear_pending(row.id, attempt.n)
            context.event(row.id, "forgotten", message, attempt=attempt.n)
            store.set_job(row.id, outcome=f"forgotten: not stopped ({why})")
        forgotten.append(attempt.n)
    return forgotten
