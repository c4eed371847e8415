"""runjob cancel: stop a job's active attempt, confirmed by a poll of its backend."""

from __future__ import annotations

import click

from runjob_core.cli._common import find_job, json_option, open_context, print_json


@click.command("cancel")
@click.argument("jobs", nargs=-1, required=True)
@click.option("--wait", "wait", type=float, default=None, metavar="SECONDS",
              help="How long to wait for the backend to confirm the job ended (default 60).")
@click.option("--force", is_flag=True,
              help="If the cancel cannot be confirmed, stop following the job anyway (FORGOTTEN). "
                   "This does NOT stop a job that still runs.")
@json_option
def command(jobs: tuple[str, ...], wait: float | None, force: bool, as_json: bool) -> None:
    """Cancel JOBS (ids or names; a sweep's name cancels its active elements): ask the backend, then follow each attempt (CANCELLING)
    until a poll says it ended. A job that had already ended keeps its own ending."""
    from runjob_core import lifecycle
    from runjob_core.sweep import _run as _sweeps

    context = open_context(as_json)
    results = {}
    try:
        for ref in jobs:
            sweep = _sweeps.find(context.store, ref)
            if sweep is not None:  # a sweep: every active element, and no element starts any more
                from runjob_core.cli import _sweep

                results[sweep.id] = _sweep.cancel(context, sweep, wait=wait, force=force, as_json=as_json)
                continue
            row = find_job(context.store, ref)
            results[row.id] = lifecycle.cancel(context, row, wait=wait, force=force)
            after = context.store.get_job(row.id)
            if not as_json:
                if not results[row.id] and after.state == row.state:
                    click.echo(f"{row.id}: nothing active to cancel ({row.state})", err=True)
                else:
                    click.echo(f"{row.id}: {after.state}" + (f" ({after.outcome})" if after.outcome else ""))
            results[row.id] = {"asked": results[row.id], "state": after.state, "outcome": after.outcome}
    finally:
        context.close()
    if as_json:
        print_json(results)
