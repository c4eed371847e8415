"""What a monitoring cycle shows: one :class:`JobView` per job, and the cycle's result."""

from __future__ import annotations

import attrs

from runjob_core.store import AttemptRow


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


def view_of(job_id: str, name: str, attempt: AttemptRow | None, outcome: str | None = None) -> JobView:
    if attempt is None:
        return JobView(job_id, name, 0, "NEW", outcome=outcome)
    return JobView(job_id, name, attempt.n, attempt.state, attempt.reason, attempt.started_at, attempt.ended_at,
                   attempt.step, attempt.rows_done, outcome=outcome)
