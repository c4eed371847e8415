"""runjob report: the results report of a job."""

from __future__ import annotations

import click

from runjob_core.cli._common import find_job, open_context, print_json


@click.command("report")
@click.argument("job")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (samples whole).")
@click.option("--md", "as_md", is_flag=True, help="Print the report as Markdown (samples whole).")
def command(job: str, as_json: bool, as_md: bool) -> None:
    """Summarise JOB (id or name): results, samples, anomalies, attempts, cost, closing line, next steps.
    A sweep's name or id: one row per element (score with a 95% interval, GPU-hours, cost), the best
    element and its margin, a pivot when two keys vary."""
    from runjob_core.cli import _show
    from runjob_core.reporting import render
    from runjob_core.reporting.report import build_report
    from runjob_core.sweep import _run as _sweeps

    if as_json and as_md:
        raise click.UsageError("choose one of --json and --md")
    context = open_context(as_json or as_md)
    try:
        sweep = _sweeps.find(context.store, job)
        if sweep is not None:
            from runjob_core.cli import _sweep

            _sweep.report(context, sweep, as_json=as_json, as_md=as_md)
            return
        data = build_report(context.store, find_job(context.store, job), clusters=context.clusters,
                            hook=context.pm.hook)
    finally:
        context.close()
    if as_json:
        print_json(data)
    elif as_md:
        click.echo(render.markdown(data))
    else:
        _show.report(data)
