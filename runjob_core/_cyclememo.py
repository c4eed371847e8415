"""What the monitor remembers between cycles, so a job that did not change costs nothing.

A cycle over thousands of queued jobs must cost little more than the scheduler's own
``squeue``: the active attempts are read from the store only when the store changed
(:meth:`Store.generation`), and per attempt the last status, view and observation time are
kept, so an attempt whose status object came back unchanged (the SLURM backend reuses the
status of an unchanged squeue line), whose row did not change and that nobody woke is
skipped: no store write, no health call, no new object.
"""

from __future__ import annotations

import time
from typing import Any

import attrs

from runjob_core.models import PENDING, RUNNING, SUBMITTING

#: A running job that the push path reports no news about is still looked at (log, progress,
#: health checks such as a stall) this often, in case the watcher missed something.
SWEEP_SECONDS = 60.0
_PAD = "runjob-core:cycle-memo"


@attrs.define
class Seen:
    attempt: Any  # the AttemptRow it was observed with
    status: Any  # the JobStatus it was observed with
    view: Any  # the JobView shown for it
    at: float  # time.monotonic() of the observation


def _pad(context) -> dict:
    return context.scratchpad(_PAD)


def active(context, job_ids: list[str] | None):
    """(active attempts with a submission, their job heads), re-read only when the store changed."""
    pad = _pad(context)
    key = (context.store.generation(), tuple(job_ids) if job_ids else None)
    cached = pad.get("active")
    if cached is not None and cached[0] == key:
        return cached[1], cached[2]
    store = context.store
    attempts = [a for a in store.active_attempts(job_ids) if a.submission_json]
    heads = store.job_heads([a.job_id for a in attempts])
    # Keyed by the generation read *before*: a change made meanwhile forces a re-read.
    pad["active"] = (key, attempts, heads)
    return attempts, heads


def seen(context) -> dict[tuple[str, int], Seen]:
    return _pad(context).setdefault("seen", {})


def remember(context, attempt, status, view) -> None:
    seen(context)[(attempt.job_id, attempt.n)] = Seen(attempt, status, view, time.monotonic())


def unchanged(last: Seen | None, attempt, status, *, pushed: bool) -> bool:
    """True when observing *attempt* again would find nothing new."""
    if last is None or not (status is last.status or status == last.status):
        return False
    if not (attempt is last.attempt or attempt == last.attempt):
        return False
    if status.state == PENDING and attempt.state in (PENDING, SUBMITTING):
        return True  # still queued: no log, no progress yet
    # A running job's news (log lines, markers) comes from the watcher while one is alive.
    return pushed and status.state == RUNNING and time.monotonic() - last.at < SWEEP_SECONDS
