"""runjob watch: follow jobs until they end."""

from __future__ import annotations

import sys

import click

from runjob_core.cli._common import find_job, open_context


@click.command("watch")
@click.argument("jobs", nargs=-1)
@click.option("--once", is_flag=True, help="One monitoring cycle, then exit (for cron).")
@click.option("--interval", type=float, default=1.0, show_default=True, help="Shortest seconds between polls.")
@click.option("--max-interval", type=float, default=30.0, show_default=True, help="Longest seconds between polls while idle.")
@click.option("--json", "as_json", is_flag=True, help="Print events as JSON lines.")
def command(jobs: tuple[str, ...], once: bool, interval: float, max_interval: float, as_json: bool) -> None:
    """Poll JOBS (ids or names; default: every active job), read new log lines, run health checks."""
    from runjob_core import interrupted
    from runjob_core.cli import _show
    from runjob_core.monitor import Monitor

    context = open_context(as_json, events_on_stdout=True)
    try:
        job_ids = [find_job(context.store, ref).id for ref in jobs]
        if not job_ids:
            job_ids = sorted({a.job_id for a in context.store.active_attempts()})
            if not job_ids:
                click.echo("no active jobs", err=True)
                return
        # Attempts an interrupted runjob left SUBMITTING: followed if the backend has them,
        # else not watched (nothing runs) with what to do.
        unsubmitted = set()
        for settled in interrupted.settle(context, [context.store.get_job(j) for j in job_ids]):
            click.secho(settled.message, err=True, fg=None if settled.submission else "yellow")
            if settled.submission is None and settled.attempt:
                unsubmitted.add(settled.job_id)
        job_ids = [j for j in job_ids if j not in unsubmitted]
        if not job_ids:
            sys.exit(1)
        live = _show.LiveTable(enabled=not as_json and sys.stderr.isatty(), store=context.store)
        with live:
            Monitor.of(context).watch(job_ids, once=once, min_interval=interval, max_interval=max_interval,
                                      on_cycle=live.update)
        failed = _ended_unsuccessfully(context.store, job_ids)
    finally:
        context.close()
    if failed:
        # A script (or cron, with --once) must be able to tell a failed job from a finished one.
        click.echo(f"{len(failed)} job(s) ended unsuccessfully: {', '.join(failed)}", err=True)
        sys.exit(1)


def _ended_unsuccessfully(store, job_ids: list[str]) -> list[str]:
    """The watched jobs that have ended in any state but COMPLETED, as "name (STATE)"."""
    from runjob_core.models import ACTIVE_STATES, COMPLETED

    failed = []
    for job_id in job_ids:
        row, latest = store.get_job(job_id), store.latest_attempt(job_id)
        state = latest.state if latest is not None else row.state
        if state not in ACTIVE_STATES and state != COMPLETED:
            failed.append(f"{row.name} ({state})")
    return failed
