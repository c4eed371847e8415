"""runjob report: the results report of a job."""

from __future__ import annotations

import click

from runjob_core.cli._common import json_option, open_context, print_json


@click.command("report")
@click.argument("job")
@json_option
def command(job: str, as_json: bool) -> None:
    """Summarise JOB (id or name): attempts, results, samples, anomalies, next step."""
    from runjob_core.cli import _show
    from runjob_core.report import build_report

    context = open_context(as_json)
    try:
        data = build_report(context.store, context.store.find_job(job))
    finally:
        context.close()
    if as_json:
        print_json(data)
    else:
        _show.report(data)
