"""runjob's own reporting, a built-in plugin of ``runjob_collected`` (registered in
:data:`runjob_core.plugins.DEFAULT_PLUGINS`, so called after every other plugin): the
collect's summary as a ``results`` event, the activity log, the dashboard synced for the
job. The logic is in :mod:`runjob_core.reporting.chain`, imported only when a collect ends
(``runjob --help`` and ``runjob status`` never load it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from runjob_core import hookimpl

if TYPE_CHECKING:
    from runjob_core.context import RunContext
    from runjob_core.models import Artifact, Submission


@hookimpl
def runjob_collected(submission: Submission, artifacts: Sequence[Artifact], context: RunContext) -> None:
    from runjob_core.reporting import chain

    row = context.store.get_job(submission.job_id)
    chain.after_collect(context, row, submission.attempt, artifacts)
