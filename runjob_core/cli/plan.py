"""runjob plan: all of pre-flight in one view; submits nothing."""

from __future__ import annotations

import sys

import click

from runjob_core.cli._common import json_option, load_job, open_context, print_json, print_table


@click.command("plan")
@click.argument("job_file", type=click.Path(dir_okay=False))
@click.option("--yes-large", is_flag=True, help="A sweep: allow more than 10,000 elements.")
@json_option
def command(job_file: str, yes_large: bool, as_json: bool) -> None:
    """Load JOB_FILE, run the pre-flight checks, render the script and show the review.
    A sweep shows its element table and pre-flight once per resource shape."""
    from runjob_core import config, lifecycle
    from runjob_core.cli import _sweep

    if _sweep.is_sweep_file(job_file):
        sweep = _sweep.load(job_file, yes_large)
        context = open_context(as_json)
        try:
            _sweep.plan(context, sweep, as_json)
        finally:
            context.close()
        return
    job = load_job(job_file)
    context = open_context(as_json)
    try:
        cluster = lifecycle.cluster_for(context, job)
        checks = lifecycle.preflight(context, job, cluster)
        rendered = lifecycle.render_preview(context, job, cluster)
    finally:
        context.close()
    review = lifecycle.review_rows(job, cluster, rendered)
    if as_json:
        print_json({
            "job": job.name, "cluster": cluster.name, "refused": checks.refused, "problems": list(checks.problems),
            "warnings": list(checks.warnings), "estimates": [config.unstructure(e) for e in checks.estimates],
            "review": dict(review), "script": rendered.script,
        })
    else:
        print_table(f"Plan: {job.name}", ["", ""], [list(r) for r in review])
        for estimate in checks.estimates:
            click.echo(f"estimate ({estimate.source}): {estimate.summary}")
        for warning in checks.warnings:
            click.secho(f"warning: {warning}", fg="yellow")
        for problem in checks.problems:
            click.secho(f"refused: {problem}", fg="red")
        click.echo("verdict: " + ("REFUSED (submit needs --force)" if checks.refused else "ready to submit"))
    if checks.refused:
        sys.exit(1)
