"""runjob run: pre-flight, review, submit, watch, collect and report, in one command."""

from __future__ import annotations

import sys

import click

from runjob_core.cli._common import confirm_review, json_option, load_job, open_context, print_json


@click.command("run")
@click.argument("job_file", type=click.Path(dir_okay=False))
@click.option("-y", "--yes", is_flag=True, help="Submit without the review prompt.")
@click.option("--canary", is_flag=True, help="Run the job's canary: a row limit (RUNJOB_LIMIT) and its own results folder.")
@click.option("--force", is_flag=True, help="Submit even if pre-flight refuses the job.")
@click.option("--new", is_flag=True, help="Submit a new job even if the same spec is already running.")
@click.option("--interval", type=float, default=0.5, show_default=True, help="Shortest seconds between polls.")
@json_option
def command(job_file: str, yes: bool, canary: bool, force: bool, new: bool, interval: float, as_json: bool) -> None:
    """Take JOB_FILE through every phase; exit 0 only if it completed and its results were collected."""
    from runjob_core import lifecycle, monitor
    from runjob_core.cli import _show
    from runjob_core.errors import RefusedError
    from runjob_core.reporting.report import build_report

    job = load_job(job_file)
    context = open_context(as_json)
    try:
        cluster = lifecycle.cluster_for(context, job)
        context.transport(cluster).warm()
        kind = "full"
        if canary:
            job, kind = lifecycle.apply_canary(job), "canary"
        else:
            _warn_failed_canary(context, job, yes)
        checks = lifecycle.preflight(context, job, cluster, canary=canary)
        _show.preflight(checks, as_json)
        if checks.refused and not force:
            raise RefusedError("pre-flight refused the job:\n  " + "\n  ".join(checks.problems) + "\n(pass --force to submit anyway)")
        row, _submission = lifecycle.submit(context, job, cluster, spec_path=job_file, kind=kind, new=new, confirm=confirm_review(yes))
        _record_estimates(context, row, checks)
        live = _show.LiveTable(enabled=not as_json and sys.stderr.isatty())
        with live:
            monitor.watch(context, [row.id], min_interval=interval, max_interval=_max_interval(cluster.type),
                          on_cycle=live.update)
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


def _record_estimates(context, row, checks) -> None:
    """Keep pre-flight's estimates with the job, for the report's estimate-versus-actual."""
    if not checks.estimates or any(e.kind == "estimates" for e in context.store.events(row.id, kinds=("estimates",))):
        return
    items = [{"source": e.source, "summary": e.summary, "fits": e.fits, "data": e.data} for e in checks.estimates]
    context.store.add_event(row.id, "estimates", f"{len(items)} pre-flight estimates", data={"estimates": items})


def _max_interval(backend: str) -> float:
    # Local jobs are cheap to poll; a scheduler should not be hammered.
    return 5.0 if backend == "local" else 30.0


def _warn_failed_canary(context, job, yes: bool) -> None:
    canary = context.store.latest_canary(job.name)
    if canary is None or canary.state == "COMPLETED" and not (canary.outcome or "").startswith(("stopped", "failed")):
        return
    message = f"the last canary of {job.name} ({canary.id}) ended {canary.state}: {canary.outcome or 'see runjob report ' + canary.id}"
    click.secho(f"warning: {message}", fg="yellow", err=True)
    if not yes:
        if not sys.stdin.isatty():
            from runjob_core.errors import RefusedError

            raise RefusedError(f"{message}; pass --yes to run the full job anyway")
        if not click.confirm("Run the full job anyway?", default=False):
            from runjob_core.errors import RefusedError

            raise RefusedError("not submitted: the last canary failed")
