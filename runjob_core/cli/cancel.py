"""runjob cancel: stop a job's active attempt."""

from __future__ import annotations

import click

from runjob_core.cli._common import json_option, open_context, print_json


@click.command("cancel")
@click.argument("jobs", nargs=-1, required=True)
@json_option
def command(jobs: tuple[str, ...], as_json: bool) -> None:
    """Cancel JOBS (ids or names)."""
    from runjob_core import lifecycle

    context = open_context(as_json)
    results = {}
    try:
        for ref in jobs:
            row = context.store.find_job(ref)
            results[row.id] = lifecycle.cancel(context, row)
            if not results[row.id] and not as_json:
                click.echo(f"{row.id}: nothing active to cancel ({row.state})", err=True)
    finally:
        context.close()
    if as_json:
        print_json(results)
