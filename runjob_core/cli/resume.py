"""runjob resume: continue a stopped job from its newest complete checkpoint."""

from __future__ import annotations

import click

from runjob_core.cli._common import find_job, json_option, open_context, print_json


@click.command("resume")
@click.argument("job")
@click.option("-y", "--yes", is_flag=True, help="Resubmit without asking.")
@click.option("--force", is_flag=True, help="Run the workdir as it is now, even if it changed since the job started.")
@click.option("--interval", type=float, default=0.5, show_default=True, help="A sweep: shortest seconds between polls.")
@json_option
def command(job: str, yes: bool, force: bool, interval: float, as_json: bool) -> None:
    """Resubmit JOB (same spec, attempt n+1) from where it stopped. A sweep's name resubmits
    only its unfinished elements and follows them to the end (exit 0 when all completed)."""
    from runjob_core import interrupted, resume
    from runjob_core.errors import RefusedError
    from runjob_core.sweep import _address, _run as _sweeps

    context = open_context(as_json)
    try:
        sweep = _sweeps.find(context.store, job)
        if sweep is not None:
            from runjob_core.cli import _sweep

            _sweep.resume(context, sweep, yes=yes, interval=interval, as_json=as_json)
            return
        element = _address.resolve(context.store, job) if _address.is_element_ref(job) else None
        if element is not None and element.job is None:  # never submitted (waiting for a slot, or refused): alone
            from runjob_core.cli import _sweep

            _sweep.resume(context, element.sweep, yes=yes, interval=interval, as_json=as_json, only=element.index)
            return
        row = element.job if element is not None else find_job(context.store, job)
        if interrupted.stuck(context, row) is not None:
            # Interrupted while submitting: the same attempt, reattached by its tag or submitted now.
            submission = interrupted.finish(context, row)
            if as_json:
                print_json({"job_id": row.id, "attempt": submission.attempt, "backend_job_id": submission.backend_job_id,
                            "resume_from": None, "reason": "interrupted while submitting", "source": submission.source})
            else:
                click.echo(f"{row.id} attempt {submission.attempt}: {submission.backend_job_id} "
                           "(it had been interrupted while submitting)")
            return
        plan, latest = resume.plan(context, row)
        summary = f"{row.name} ({row.id}): attempt {latest.n} ended {latest.state}; " + (
            f"resume from {plan.checkpoint} (step {plan.step})" if plan.checkpoint else plan.reason)
        if not as_json:
            click.echo(summary)
            for warning in resume.warnings(row, latest, plan):
                click.secho(f"warning: {warning}", fg="yellow")
        if not yes and not click.confirm("Resubmit?", default=False):
            raise RefusedError("not resubmitted")
        submission = resume.resubmit(context, row, plan, after=latest.n, accept_code_changes=force)
    finally:
        context.close()
    if as_json:
        print_json({"job_id": row.id, "attempt": submission.attempt, "backend_job_id": submission.backend_job_id,
                    "resume_from": plan.checkpoint, "reason": plan.reason, "source": plan.source})
    else:
        click.echo(f"{row.id} attempt {submission.attempt}: {submission.backend_job_id}")
