"""runjob events: the activity log."""

from __future__ import annotations

import json
import time

import click

from runjob_core.cli._common import open_context


@click.command("events")
@click.argument("job", required=False)
@click.option("--kind", "kinds", multiple=True, help="Only events of this kind (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document: the list of events.")
@click.option("--jsonl", "as_jsonl", is_flag=True, help="One JSON object per line (for streaming tools).")
def command(job: str | None, kinds: tuple[str, ...], as_json: bool, as_jsonl: bool) -> None:
    """Show the activity log of JOB (id or name), or of every job."""
    context = open_context(as_json or as_jsonl)
    try:
        job_id = context.store.find_job(job).id if job else None
        events = context.store.events(job_id, kinds=kinds)
        if as_json:
            click.echo(json.dumps([event.to_json() for event in events], indent=2, default=str))
            return
        for event in events:
            if as_jsonl:
                click.echo(json.dumps(event.to_json(), default=str))
            else:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(event.ts))
                click.echo(f"{stamp} {event.job_id or '-':<14} {event.kind:<14} {event.message}  [{event.source}]")
    finally:
        context.close()
