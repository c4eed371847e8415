"""runjob render: print the script a job would run."""

from __future__ import annotations

import click

from runjob_core.cli._common import json_option, load_job, open_context, print_json


@click.command("render")
@click.argument("job_file", type=click.Path(dir_okay=False))
@click.option("--canary", is_flag=True, help="Render the job's canary variant.")
@json_option
def command(job_file: str, canary: bool, as_json: bool) -> None:
    """Render JOB_FILE's script with placeholder ids; submits nothing."""
    from runjob_core import lifecycle

    job = load_job(job_file)
    context = open_context(as_json)
    try:
        cluster = lifecycle.cluster_for(context, job)
        if canary:
            job = lifecycle.apply_canary(job)
        rendered = lifecycle.render_preview(context, job, cluster, limit=job.canary.limit if canary else None)
    finally:
        context.close()
    if as_json:
        print_json({"template": rendered.template, "source": rendered.source, "script": rendered.script})
    else:
        click.echo(rendered.script, nl=False)
