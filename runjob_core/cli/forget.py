"""runjob forget: stop following a job runjob can no longer reach."""

from __future__ import annotations

import click

from runjob_core.cli._common import find_job, json_option, print_json


@click.command("forget")
@click.argument("jobs", nargs=-1, required=True)
@json_option
def command(jobs: tuple[str, ...], as_json: bool) -> None:
    """Mark the active attempts of JOBS as FORGOTTEN, asking no backend anything (for a job
    whose backend is broken, uninstalled or unreachable). Nothing is stopped: a job that
    still runs keeps running; use `runjob cancel` while the backend can still be asked."""
    from runjob_core import lifecycle
    from runjob_core.store import Store, state_dir

    # No plugins and no clusters.yaml: forget must work when those are what is broken.
    store = Store.open_default()
    context = lifecycle.RunContext(store=store, pm=None, clusters={}, state_dir=state_dir(), on_event=None)
    results = {}
    try:
        for ref in jobs:
            row = find_job(store, ref)
            results[row.id] = lifecycle.forget(context, row)
            if not as_json:
                if results[row.id]:
                    attempts = ", ".join(str(n) for n in results[row.id])
                    click.echo(f"{row.id}: attempt {attempts} FORGOTTEN; runjob no longer follows it and did not stop it "
                               f"(check {row.cluster} yourself)")
                else:
                    click.echo(f"{row.id}: nothing active to forget ({row.state})", err=True)
    finally:
        store.close()
    if as_json:
        print_json(results)
