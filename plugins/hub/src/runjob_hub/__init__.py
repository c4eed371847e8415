"""runjob's Hub chain (not a backend): after the backend downloaded a job's results,
publish them to the Hugging Face Hub with a dataset card, load them back to verify, and
validate them (truncation, missing fields, score distribution, duplicates).

It enters through ``runjob_collect`` like any publisher; ``runjob publish`` (this plugin's
command) does the same for any results folder. A member's ``runjob report`` on a host that
cannot reach the folder another member collected into reads the published copy
(``runjob_fetch_results``). The work is in :mod:`runjob_hub.publish`,
:mod:`runjob_hub.validate`, :mod:`runjob_hub.artifacts` and :mod:`runjob_hub.fetch`.
"""

from __future__ import annotations

from runjob_core import hookimpl

SOURCE = "runjob-hub"


@hookimpl(trylast=True)
def runjob_collect(job, submission, status, dest, context):
    """After the backend downloaded the results: publish and verify (when ``upload.repo`` is
    set), then validate. Every step becomes an artifact and an event."""
    from runjob_core import readers
    from runjob_core.models import ACTIVE_STATES
    from runjob_hub import artifacts

    if status.state in ACTIVE_STATES:
        return []  # a peek at a running job: partial results are neither published nor validated
    # A harness's own layout (lm-eval's samples files) read once as one table, written
    # beside them: validation and publishing check the rows the report shows.
    table = readers.read(dest, job, context.pm.hook)
    table_file = readers.write_rows(table, dest) if table is not None else None
    if not artifacts.main_results_file(dest, table_file):
        return []
    found = []
    if job.upload.repo:
        # The dataset card records the run: its id, attempts and script.
        row = context.store.get_job(submission.job_id)
        attempts = len(context.store.attempts(row.id))
        found += artifacts.publish(dest, job, row, attempts, row.script, submission.cluster, table_file=table_file,
                                   tasks=table.tasks if table is not None else None)
    found += artifacts.validate(dest, job, table_file)
    return found


@hookimpl
def runjob_fetch_results(artifacts, dest):
    """The results this plugin published for the job, read back from the Hub at their commit."""
    from runjob_hub import fetch

    return fetch.published_results(artifacts, dest)
