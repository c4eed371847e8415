"""runjob submit: pre-flight, review and submit a job, then return."""

from __future__ import annotations

import click

from runjob_core.cli._common import confirm_review, json_option, load_job, open_context, print_json


@click.command("submit")
@click.argument("job_file", type=click.Path(dir_okay=False))
@click.option("-y", "--yes", is_flag=True, help="Submit without the review prompt.")
@click.option("--canary", is_flag=True, help="Submit the job's canary instead.")
@click.option("--force", is_flag=True, help="Submit even if pre-flight refuses the job.")
@click.option("--new", is_flag=True, help="Submit a new job even if the same spec is already running.")
@click.option("--skip-refused", is_flag=True, help="A sweep: submit the elements pre-flight accepts, skip the refused ones.")
@click.option("--yes-large", is_flag=True, help="A sweep: allow more than 10,000 elements.")
@json_option
def command(job_file: str, yes: bool, canary: bool, force: bool, new: bool, skip_refused: bool, yes_large: bool,
            as_json: bool) -> None:
    """Submit JOB_FILE; follow it with `runjob watch`. A sweep (a ``sweep:`` key) is recorded
    and its first max_parallel elements submitted."""
    from runjob_core import config, lifecycle
    from runjob_core.cli import _show, _sweep
    from runjob_core.cli.run import _ask_about_failed_canary

    if _sweep.is_sweep_file(job_file):
        from runjob_core.errors import RunjobError

        if canary or new:
            raise RunjobError(f"{job_file} is a sweep: --canary and --new are for single jobs")
        sweep = _sweep.load(job_file, yes_large)
        context = open_context(as_json)
        try:
            _sweep.submit(context, sweep, spec_path=job_file, yes=yes, force=force, skip_refused=skip_refused,
                          as_json=as_json)
        finally:
            context.close()
        return
    job = load_job(job_file)
    context = open_context(as_json)
    try:
        launched = lifecycle.launch(
            context, job, spec_path=job_file, canary=canary, force=force, new=new, confirm=confirm_review(yes),
            failed_canary=_ask_about_failed_canary(yes), on_preflight=lambda checks: _show.preflight(checks, as_json),
        )
        row, submission = launched.row, launched.submission
    finally:
        context.close()
    if as_json:
        print_json({"job_id": row.id, "name": row.name, "submission": config.unstructure(submission)})
    else:
        click.echo(f"{row.id} {submission.backend_job_id}")
