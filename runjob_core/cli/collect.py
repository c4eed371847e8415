"""runjob collect: download, publish, verify and validate a finished job's results."""

from __future__ import annotations

import sys

import click

from runjob_core.cli._common import json_option, open_context, print_json, print_table


@click.command("collect")
@click.argument("job")
@json_option
def command(job: str, as_json: bool) -> None:
    """Collect the results of JOB (id or name) into ./results/<name>/."""
    from runjob_core import config, lifecycle

    context = open_context(as_json)
    try:
        row = context.store.find_job(job)
        collected = lifecycle.collect(context, row)
    finally:
        context.close()
    if as_json:
        print_json({"dest": str(collected.dest), "ok": collected.ok, "problems": list(collected.problems),
                    "artifacts": [config.unstructure(a) for a in collected.artifacts]})
    else:
        print_table(f"Collected into {collected.dest}", ["name", "kind", "location", "rows", "source"],
                    [[a.name, a.kind, a.location, a.rows, a.source] for a in collected.artifacts])
        for problem in collected.problems:
            click.secho(f"problem: {problem}", fg="red")
    if not collected.ok:
        sys.exit(1)
