"""Manual resume (``runjob resume``): plan from the newest complete checkpoint, resubmit."""

from __future__ import annotations

from runjob_core import lifecycle
from runjob_core.errors import RunjobError
from runjob_core.models import ACTIVE_STATES, COMPLETED, ResumePlan, Submission

#: A job that ran longer than this without any checkpoint has lost real work.
LONG_RUN_SECONDS = 30 * 60


def plan(context, row) -> tuple[ResumePlan, object]:
    latest = context.store.latest_attempt(row.id)
    if latest is None or latest.submission is None:
        raise RunjobError(f"job {row.id} was never submitted; use runjob submit")
    if latest.state in ACTIVE_STATES:
        raise RunjobError(f"job {row.id} is still {latest.state} (attempt {latest.n}); cancel it first or let it end")
    if latest.state == COMPLETED:
        raise RunjobError(f"job {row.id} completed; there is nothing to resume")
    status = lifecycle.stored_status(latest)
    from runjob_core import _plugin_errors

    result = _plugin_errors.call_first(context, context.hook("runjob_resume", row.backend),
                                       {"job": row.spec, "submission": latest.submission, "status": status,
                                        "cluster": lifecycle.job_cluster(context, row), "context": context},
                                       hook="runjob_resume", blame=row.backend, job_id=row.id, attempt=latest.n)
    if result is None:
        raise RunjobError(f"backend {row.backend!r} cannot resume job {row.id}")
    return result, latest


def warnings(row, latest, plan: ResumePlan) -> list[str]:
    out = []
    ran = (latest.ended_at or 0) - (latest.started_at or latest.ended_at or 0)
    if plan.checkpoint is None and ran > LONG_RUN_SECONDS and not latest.rows_done:
        out.append(
            f"attempt {latest.n} ran {int(ran // 60)} minutes and left no complete checkpoint and no results: that work is lost. "
            "Make the script checkpoint (runjob_core.job.checkpoint_saved) before resubmitting"
        )
    return out


def resubmit(context, row, plan: ResumePlan, *, after: int | None = None, accept_code_changes: bool = False) -> Submission:
    """Attempt n+1 from *plan*; *after* is the attempt the plan was made from: if another runjob
    process resubmitted meanwhile, nothing is submitted twice. A workdir changed since the job
    started is refused unless *accept_code_changes*."""
    submission = lifecycle.resubmit(context, row, resume_from=plan.checkpoint, resume_env=dict(plan.env), after=after,
                                    accept_code_changes=accept_code_changes)
    if submission is None:
        raise RunjobError(f"job {row.id} was resubmitted by another runjob process meanwhile; see runjob status {row.id}")
    return submission
