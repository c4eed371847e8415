"""runjob events: the activity log."""

from __future__ import annotations

import json
import time

import click

from runjob_core.cli._common import find_job, open_context


@click.command("events")
@click.argument("job", required=False)
@click.option("--kind", "kinds", multiple=True, help="Only events of this kind (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document: the list of events.")
@click.option("--jsonl", "as_jsonl", is_flag=True, help="One JSON object per line (for streaming tools).")
@click.option("--md", "as_md", is_flag=True, help="The Markdown activity log of artifact steps (.runjob/activity.md).")
def command(job: str | None, kinds: tuple[str, ...], as_json: bool, as_jsonl: bool, as_md: bool) -> None:
    """Show the activity log of JOB (id or name), or of every job."""
    context = open_context(as_json or as_jsonl)
    try:
        if as_md:
            from runjob_core.reporting import activity

            text = activity.read(context.state_dir)
            if job:  # the header, then only this job's rows (its name and id are in the job cell)
                ref = find_job(context.store, job)
                lines = text.splitlines(keepends=True)
                text = "".join(lines[:4]) + "".join(l for l in lines[4:] if f"| {ref.name} {ref.id} |" in l)
            click.echo(text or f"no artifact steps recorded yet in {activity.path_for(context.state_dir)}", nl=not text)
            return
        job_id = find_job(context.store, job).id if job else None
        events = context.store.events(job_id, kinds=kinds)
        if as_json:
            click.echo(json.dumps([event.to_json() for event in events], indent=2, default=str))
            return
        for event in events:
            if as_jsonl:
                click.echo(json.dumps(event.to_json(), default=str))
            else:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(event.ts))
                click.echo(f"{stamp} {event.job_id or '-':<14} {event.kind:<14} {event.message}  [{event.source}]" + (f" {event.who}" if event.who else ""))
    finally:
        context.close()
