"""Attempts an interrupted runjob left in ``SUBMITTING`` (Ctrl-C or ``kill -9`` around the
submit): every command that meets one settles it here.

An attempt is recorded ``SUBMITTING`` with its tag before the backend is asked; the
submission is recorded when the backend answers. Between the two, the scheduler may have
taken the job or not, and only the backend can tell: :func:`settle` asks it for the job
carrying the attempt's tag (``runjob_reattach``) and records it when found. It never
submits: ``runjob resume`` does that (:func:`finish`), ``runjob run``/``submit`` of the same
spec do it through :func:`runjob_core.lifecycle.submit`.

While a live runjob process holds ``submit:<job id>`` it is submitting that attempt right
now: it is left to finish.
"""

from __future__ import annotations

import attrs

from runjob_core.errors import RunjobError
from runjob_core.models import SUBMITTING, Submission
from runjob_core.store import AttemptRow, JobRow


@attrs.frozen
class Settled:
    """What :func:`settle` found for one job: the submission (reattached), or what to do."""

    job_id: str
    attempt: int
    submission: Submission | None
    message: str


def stuck(context, row: JobRow) -> AttemptRow | None:
    """The latest attempt of *row* if it is SUBMITTING without a recorded submission."""
    latest = context.store.latest_attempt(row.id)
    if latest is None or latest.state != SUBMITTING or latest.submission_json:
        return None
    return latest


def settle(context, rows: list[JobRow]) -> list[Settled]:
    """For each job of *rows* whose latest attempt an interrupted runjob left SUBMITTING, ask
    the backend for the job with its tag and follow it if found; else say what to do."""
    from runjob_core import lifecycle

    out = []
    # One query for all of them (runjob status lists many jobs; few are ever stuck).
    maybe = {a.job_id for a in context.store.active_attempts([r.id for r in rows])
             if a.state == SUBMITTING and not a.submission_json}
    for row in rows:
        if row.id not in maybe or stuck(context, row) is None:
            continue
        try:
            with context.store.claim(f"submit:{row.id}", wait=0):
                attempt = stuck(context, row)  # settled by another process meanwhile?
                if attempt is None:
                    continue
                job, cluster = row.spec, lifecycle.job_cluster(context, row)
                found = lifecycle._reattach(context, row, job, cluster, attempt)
        except RunjobError as exc:
            if "another runjob process" not in str(exc):
                raise
            out.append(Settled(row.id, 0, None, f"{row.id}: another runjob process is submitting it right now; "
                                                f"`runjob status {row.id}` shows it once the backend answered"))
            continue
        if isinstance(found, Submission):
            out.append(Settled(row.id, attempt.n, found, f"{row.id}: attempt {attempt.n} was interrupted while submitting; "
                                                        f"the backend has it as {found.backend_job_id} (found by its tag): following it"))
            continue
        message = (f"{row.id}: attempt {attempt.n} was interrupted before the backend took it (no job carries its tag "
                   f"{attempt.tag}); `runjob resume {row.id}` submits it, `runjob cancel {row.id}` drops it")
        context.event(row.id, "submit_interrupted", message, attempt=attempt.n)
        out.append(Settled(row.id, attempt.n, None, message))
    return out


def finish(context, row: JobRow) -> Submission:
    """``runjob resume`` of a job whose attempt was interrupted while submitting: reattach it by
    its tag, or submit that same attempt (same number, same tag) if the backend never got it."""
    from runjob_core import lifecycle

    attempt = stuck(context, row)
    if attempt is None:
        raise RunjobError(f"job {row.id} has no attempt left SUBMITTING")
    job = row.spec
    return lifecycle._submit_attempt(context, row, job, lifecycle.cluster_for(context, job), attempt_row=attempt)


def drop(context, row: JobRow) -> bool:
    """``runjob cancel`` of an attempt interrupted before the backend took it (none has its
    tag): record it CANCELLED, as nothing runs. False when it was found and is followed."""
    import time

    from runjob_core import lifecycle

    settled = settle(context, [row])
    if not settled or settled[0].submission is not None or not settled[0].attempt:
        return False
    n = settled[0].attempt
    context.store.update_attempt(row.id, n, state="CANCELLED", ended_at=time.time(),
                                 reason="interrupted before the backend took it; nothing was running")
    context.store.set_job(row.id, state="CANCELLED", outcome="cancelled by the user before it was submitted")
    context.event(row.id, "cancelled", f"attempt {n}: interrupted before the backend took it; nothing to stop", attempt=n)
    lifecycle.release_attempt(context, row, context.store.attempt(row.id, n), reason="cancelled before submitting")
    return True
