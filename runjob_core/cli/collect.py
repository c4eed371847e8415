"""runjob collect: download, publish, verify and validate a finished job's results."""

from __future__ import annotations

import sys

import click

from runjob_core.cli._common import find_job, json_option, open_context, print_json, print_table


@click.command("collect")
@click.argument("job")
@json_option
def command(job: str, as_json: bool) -> None:
    """Collect the results of JOB (id or name) into ./results/<name>/.

    Of a job still running this is a peek: a partial copy, nothing recorded as final.
    It can always run again: files missing or changed locally are fetched again."""
    from runjob_core import config, lifecycle

    context = open_context(as_json)
    try:
        row = find_job(context.store, job)
        collected = lifecycle.collect(context, row)
    finally:
        context.close()
    if as_json:
        print_json({"dest": str(collected.dest), "ok": collected.ok, "partial": collected.partial, "state": collected.state,
                    "problems": list(collected.problems), "artifacts": [config.unstructure(a) for a in collected.artifacts]})
    else:
        title = (f"Partial copy in {collected.dest}: {row.name} is still {collected.state}" if collected.partial
                 else f"Collected into {collected.dest}")
        print_table(title, ["name", "kind", "location", "rows", "source"],
                    [[a.name, a.kind, a.location, a.rows, a.source] for a in collected.artifacts])
        if collected.partial:
            click.echo(f"partial: nothing is recorded as final and nothing is released; the final collect follows its end "
                       f"(`runjob watch {row.id}`, then `runjob collect {row.id}`)")
        for problem in collected.problems:
            click.secho(f"problem: {problem}", fg="red")
    if not collected.ok:
        sys.exit(1)
