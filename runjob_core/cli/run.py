"""runjob run: pre-flight, review, submit, watch, collect and report, in one command."""

from __future__ import annotations

import sys

import click

from runjob_core.cli._common import confirm_review, json_option, load_job, open_context, print_json


@click.command("run")
@click.argument("job_file", type=click.Path(dir_okay=False))
@click.option("-y", "--yes", is_flag=True, help="Submit without the review prompt.")
@click.option("--canary", is_flag=True, help="Run the job's canary: a row limit (RUNJOB_LIMIT) and its own results folder. "
              "A sweep: the first element's canary runs first, and the sweep is queued only on its GO.")
@click.option("--force", is_flag=True, help="Submit even if pre-flight refuses the job.")
@click.option("--new", is_flag=True, help="Submit a new job even if the same spec is already running.")
@click.option("--interval", type=float, default=0.5, show_default=True, help="Shortest seconds between polls.")
@click.option("--skip-refused", is_flag=True, help="A sweep: run the elements pre-flight accepts, skip the refused ones.")
@click.option("--yes-large", is_flag=True, help="A sweep: allow more than 10,000 elements.")
@json_option
def command(job_file: str, yes: bool, canary: bool, force: bool, new: bool, interval: float, skip_refused: bool,
            yes_large: bool, as_json: bool) -> None:
    """Take JOB_FILE through every phase; exit 0 only if it completed and its results were collected.
    A JOB_FILE with a ``sweep:`` key runs every element (at most max_parallel at once) and exits 0
    only if every element completed."""
    from runjob_core import lifecycle, monitor
    from runjob_core.cli import _show, _sweep
    from runjob_core.reporting.report import build_report

    if _sweep.is_sweep_file(job_file):
        _run_sweep(job_file, yes, canary, force, new, interval, skip_refused, yes_large, as_json)
        return
    job = load_job(job_file)
    context = open_context(as_json)
    try:
        launched = lifecycle.launch(
            context, job, spec_path=job_file, canary=canary, force=force, new=new, confirm=confirm_review(yes),
            failed_canary=_ask_about_failed_canary(yes), on_preflight=lambda checks: _show.preflight(checks, as_json),
        )
        row = launched.row
        info = context.backend_info(context.clusters[row.cluster].type)
        live = _show.LiveTable(enabled=not as_json and sys.stderr.isatty(), store=context.store)
        with live:
            monitor.watch(context, [row.id], min_interval=min(interval, info.poll_interval),
                          max_interval=info.max_poll_interval, on_cycle=live.update)
        row = context.store.get_job(row.id)
        collected = None
        if row.state == "COMPLETED":
            collected = lifecycle.collect(context, row)
        report = build_report(context.store, context.store.get_job(row.id), clusters=context.clusters)
        if as_json:
            print_json(report)
        else:
            _show.report(report)
    finally:
        context.close()
    if row.state != "COMPLETED" or collected is None or not collected.ok:
        sys.exit(1)


def _run_sweep(job_file: str, yes: bool, canary: bool, force: bool, new: bool, interval: float, skip_refused: bool,
               yes_large: bool, as_json: bool) -> None:
    from runjob_core.cli import _sweep
    from runjob_core.errors import RunjobError

    if new:
        raise RunjobError(f"{job_file} is a sweep: --new is for single jobs (a changed sweep spec is a new sweep)")
    sweep = _sweep.load(job_file, yes_large)
    context = open_context(as_json)
    try:
        _sweep.run(context, sweep, spec_path=job_file, yes=yes, force=force, skip_refused=skip_refused,
                   interval=interval, as_json=as_json, canary=canary)
    finally:
        context.close()


def _ask_about_failed_canary(yes: bool):
    """The CLI's failed-canary policy: warn; go on with --yes, else ask on a terminal."""
    def ask(warning: str) -> bool:
        click.secho(f"warning: {warning}", fg="yellow", err=True)
        if yes:
            return True
        if not sys.stdin.isatty():
            return False
        return click.confirm("Run the full job anyway?", default=False)
    return ask
