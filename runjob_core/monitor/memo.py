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

#: A running job that the push path reports no news about is still looked at this often:
#: some health checks depend on time passing (a stall; a traceback followed by silence is
#: decided after 15 s, runjob_health's SETTLE_SECONDS), and the watcher may have missed news.
SWEEP_SECONDS = 15.0


@attrs.define
class Seen:
    attempt: Any  # the AttemptRow it was observed with
    status: Any  # the JobStatus it was observed with
    view: Any  # the JobView shown for it
    at: float  # time.monotonic() of the observation
    queued: bool  # observed waiting in the queue (nothing to read until it starts)


@attrs.define
class CycleMemo:
    """One monitor's memory of the store's active attempts and of how each was last seen."""

    #: Job id -> how its active attempt was last observed.
    seen: dict[str, Seen] = attrs.field(factory=dict)
    #: ((store generation, job ids), {cluster: (attempts, Submissions)}, job heads) of the
    #: last read, kept until the store changes.
    _last_read: tuple[Any, dict[str, tuple[list, list]], dict] | None = attrs.field(default=None, init=False)

    def groups(self, store, job_ids: list[str] | None, make_submission):
        """({cluster: (active attempts with a submission, their Submissions)}, job heads),
        re-read from the store only when it changed."""
        key = (store.generation(), tuple(job_ids) if job_ids else None)
        cached = self._last_read
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        # No job ids: the monitor follows every job of the state.
        attempts = [a for a in store.active_attempts(job_ids or None) if a.submission_json]
        heads = store.job_heads([a.job_id for a in attempts])
        by_cluster: dict[str, tuple[list, list]] = {}
        for attempt in attempts:
            group, submissions = by_cluster.setdefault(heads[attempt.job_id].cluster, ([], []))
            group.append(attempt)
            submissions.append(make_submission(attempt))
        # Keyed by the generation read *before*: a change made meanwhile forces a re-read.
        self._last_read = (key, by_cluster, heads)
        return by_cluster, heads

    def remember(self, attempt, status, view) -> None:
        queued = status.state == PENDING and attempt.state in (PENDING, SUBMITTING)
        self.seen[attempt.job_id] = Seen(attempt, status, view, time.monotonic(), queued)


def unchanged(last: Seen | None, attempt, status, *, pushed: bool) -> bool:
    """True when observing *attempt* again would find nothing new."""
    if last is None or not (status is last.status or status == last.status):
        return False
    if attempt is not last.attempt:
        if attempt != last.attempt:
            return False
        last.attempt = attempt  # the store was re-read, the row is the same: identity again next cycle
    if last.queued:
        return True  # still queued: no log, no progress yet
    # A running job's news (log lines, markers) comes from the watcher while one is alive.
    return pushed and status.state == RUNNING and time.monotonic() - last.at < SWEEP_SECONDS
